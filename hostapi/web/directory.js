// The directory page: public rooms across the federation, filtered.
(function (V) {
  'use strict';

  const { h, extLink, enc, fmtTime, fmtRel, pill, api, getDiscovery, errorBox } = V;

  // ---------------------------------------------------------------- directory

  const STATUSES = ['active', 'scheduled', 'ended', 'cancelled'];

  function directoryPage(r) {
    const params = r.params;
    const statuses = (params.get('status') || 'active,scheduled').split(',').filter((s) => STATUSES.includes(s));
    const scope = params.get('scope') === 'local' ? 'local' : 'federated';
    const page = h('section', { class: 'page directory' });
    const keyword = h('input', { type: 'search', name: 'keyword', placeholder: 'keyword', value: params.get('keyword') || '' });
    const tag = h('input', { type: 'text', name: 'tag', placeholder: 'tag', value: params.get('tag') || '' });
    const boxes = STATUSES.map((s) => h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'status', value: s, checked: statuses.includes(s) }), ' ' + s));
    const scopeSel = h('select', { name: 'scope' }, h('option', { value: 'federated', text: 'whole federation' }), h('option', { value: 'local', text: 'this host only' }));
    scopeSel.value = scope;
    const form = h('form', { class: 'filters', on: {
      submit: (e) => {
        e.preventDefault();
        const q = new URLSearchParams();
        const st = boxes.map((b) => b.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
        if (st.length && st.join(',') !== 'active,scheduled') q.set('status', st.join(','));
        if (tag.value.trim()) q.set('tag', tag.value.trim());
        if (keyword.value.trim()) q.set('keyword', keyword.value.trim());
        if (scopeSel.value !== 'federated') q.set('scope', scopeSel.value);
        const s = q.toString();
        location.hash = '#/' + (s ? '?' + s : '');
      },
    } }, keyword, tag, h('span', { class: 'checks' }, boxes), scopeSel, h('button', { type: 'submit', text: 'Filter' }));
    const list = h('div', { class: 'room-list', id: 'room-list' }, h('p', { class: 'muted', text: 'Loading rooms…' }));
    const more = h('div', { class: 'more' });
    page.append(h('div', { class: 'page-head' }, h('h1', { text: 'Public rooms' }),
      h('p', { class: 'muted', text: scope === 'local' ? 'Rooms hosted here.' : 'Public and restricted rooms across the federation, with their hosts.' })), form, list, more);
    V.app.append(page);

    const q = new URLSearchParams({ scope, status: statuses.join(',') || 'active,scheduled', limit: '50' });
    if (params.get('tag')) q.set('tag', params.get('tag'));
    if (params.get('keyword')) q.set('keyword', params.get('keyword'));
    let first = true;
    const load = async (cursor) => {
      if (cursor) q.set('cursor', cursor);
      try {
        const [disc, mirrored, res] = await Promise.all([
          getDiscovery(),
          getDiscovery().then((d) => ((d.features || []).includes('federation') ? api('/v1/mirrors') : { rooms: [] }))
            .then((m) => new Map((m.rooms || []).map((x) => [x.mirror && x.mirror.room_url, x]))).catch(() => new Map()),
          api('/v1/rooms/public?' + q.toString()),
        ]);
        if (first) list.replaceChildren();
        first = false;
        for (const room of res.result || []) list.append(roomCard(room, disc, mirrored));
        if (!list.children.length) list.append(h('p', { class: 'empty', text: 'No rooms match these filters.' }));
        more.replaceChildren();
        if (res.next_cursor) more.append(h('button', { text: 'Load more', on: { click: () => load(res.next_cursor) } }));
      } catch (err) {
        list.replaceChildren(errorBox(err, 'Could not load the directory.'));
      }
    };
    load();
    return { destroy() {} };
  }

  function roomCard(room, disc, mirrored) {
    const local = disc && room.host === disc.host;
    const m = mirrored.get(room.url);
    let origin = null;
    try {
      origin = new URL(room.url).origin;
    } catch (e) { /* no usable URL */ }
    const title = local ? h('a', { href: '#/rooms/' + enc(room.id), text: room.topic })
      : m ? h('a', { href: '#/mirrors/' + enc(room.id) + '?host=' + enc(m.mirror.host), text: room.topic })
        : origin ? extLink(origin + '/#/rooms/' + enc(room.id), room.topic) : h('span', { text: room.topic });
    const links = [];
    if (!local && m) links.push(h('a', { href: '#/mirrors/' + enc(room.id) + '?host=' + enc(m.mirror.host), text: 'verified mirror here' }));
    if (!local && origin) links.push(extLink(origin + '/#/rooms/' + enc(room.id), 'open on its host ↗'));
    if (room.status === 'ended' && local) links.push(h('a', { href: '#/rooms/' + enc(room.id) + '/outcome', text: 'outcome' }));
    const tags = (room.tags || []).map((t) => h('a', { class: 'tag', href: '#/?tag=' + enc(t), text: '#' + t }));
    return h('article', { class: 'room-card', data: { room: room.id, status: room.status } },
      h('div', { class: 'room-card-head' }, h('h2', { class: 'room-title' }, title), pill(room.status), room.visibility !== 'public' ? pill(room.visibility, 'vis') : null),
      room.agenda ? h('p', { class: 'agenda', text: room.agenda.length > 240 ? room.agenda.slice(0, 240) + '…' : room.agenda }) : null,
      h('div', { class: 'room-meta' },
        h('span', { class: 'host-label', title: room.url, text: local ? 'this host' : room.host }),
        typeof room.creator === 'string' ? h('span', { class: 'room-creator' }, 'by ', V.names.label(room.creator, local ? '' : room.id)) : null,
        h('span', { text: `${room.members} member${room.members === 1 ? '' : 's'}` }),
        h('span', { text: `${room.seq} record${room.seq === 1 ? '' : 's'}` }),
        h('span', { title: fmtTime(room.start_time) + ' → ' + fmtTime(room.end_time),
          text: room.status === 'scheduled' ? 'starts ' + fmtRel(room.start_time) : room.status === 'active' ? 'ends ' + fmtRel(room.end_time) : 'ended ' + fmtRel(room.end_time) }),
        room.language ? h('span', { text: room.language }) : null),
      tags.length ? h('div', { class: 'tags' }, tags) : null,
      links.length ? h('div', { class: 'room-links' }, links) : null);
  }

  Object.assign(V, { directoryPage });
})(window.ADPViewer = window.ADPViewer || {});
