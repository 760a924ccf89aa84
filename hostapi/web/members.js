// The members panel of a room page: the host's member list when this
// reader may read it, else the members derived from the verified chain
// (mirrors), else — the host answered 401/403, or the records are for
// members only — a plain "not public" (never an empty list).
(function (V) {
  'use strict';

  const { h, replace, pill, api } = V;

  const ROLE_ORDER = { moderator: 0, speaker: 1, observer: 2 };

  // membersPanel(rp, hooks): hooks.onRender() runs after every render.
  function membersPanel(rp, hooks) {
    const { src, model, ctx } = rp;
    const el = h('section', { class: 'card members-card' });
    let apiMembers = null; // the host's list, when it shows one
    let hidden = false; // the host does not show this room's members to this reader
    let refreshing = false;

    const notPublic = (err) => err && (err.status === 401 || err.status === 403);

    async function load() {
      if (src.members) {
        try {
          apiMembers = (await api(src.members)).result || [];
        } catch (err) {
          apiMembers = null;
          if (notPublic(err)) hidden = true;
        }
      }
      render();
    }

    // changed is called after a membership record: re-read the host's
    // list (coalesced), or re-derive it from the chain.
    function changed() {
      if (src.kind !== 'local' || apiMembers === null) return render();
      if (refreshing) return;
      refreshing = true;
      rp.timer(async () => {
        refreshing = false;
        try {
          apiMembers = (await api(src.members)).result || [];
        } catch (err) {
          if (notPublic(err)) {
            apiMembers = null;
            hidden = true;
          } // else keep the last list
        }
        render();
      }, 150);
    }

    // hide marks the members as not public (the records are members-only).
    function hide() {
      hidden = true;
      apiMembers = null;
      render();
    }

    function render() {
      if (hidden) {
        replace(el, h('h3', { text: 'Members' }), h('p', { class: 'muted members-hidden', text: 'Members are not public for this room.' }));
        hooks.onRender();
        return;
      }
      const list = apiMembers !== null ? apiMembers : model.memberList().filter((m) => m.active);
      const ul = h('ul', { class: 'members' });
      list.slice().sort((a, b) => (ROLE_ORDER[a.role] ?? 3) - (ROLE_ORDER[b.role] ?? 3) || a.joined_seq - b.joined_seq).forEach((m) => {
        ul.append(h('li', { class: 'member', data: { agent: m.agent_id } },
          ctx.agent(m.agent_id, { noLink: true }),
          pill(m.role || '?', 'role-' + (m.role || 'x')),
          m.creator ? pill('creator', 'creator') : null,
          m.perspective ? h('div', { class: 'perspective', title: 'perspective' }, V.renderInline(m.perspective)) : null,
          h('div', { class: 'member-meta' }, h('code', { class: 'did', text: m.agent_id }), ' · joined ', ctx.seqLink(m.joined_seq),
            model.members.has(m.agent_id) ? ` · ${model.members.get(m.agent_id).messages} msg` : '')));
      });
      replace(el, h('h3', {}, 'Members ', h('span', { class: 'count', text: String(list.length) })),
        apiMembers === null ? h('p', { class: 'muted small', text: 'Derived from the verified chain.' }) : null,
        list.length ? ul : h('p', { class: 'muted', text: 'No active members.' }));
      hooks.onRender();
    }

    const find = (agent) => Array.from(el.querySelectorAll('.member')).find((li) => li.dataset.agent === agent);

    return { el, load, changed, hide, render, find };
  }

  Object.assign(V, { membersPanel });
})(window.ADPViewer = window.ADPViewer || {});
