// The side cards of a room page: header, contract, type registry, mirror
// status and witness cosignatures.
(function (V) {
  'use strict';

  const { h, replace, extLink, fmtTime, fmtDur, shortHash, shortAgent, pill, enc, kv, safeHost, safeOrigin } = V;

  function renderHead(head, res, src, disc, badge) {
    const host = src.kind === 'mirror' ? (res.mirror && res.mirror.room_url ? safeHost(res.mirror.room_url) : '?') : (disc.host || location.host);
    head.replaceChildren(
      h('div', { class: 'crumbs' }, h('a', { href: '#/', text: '← Directory' }), src.kind === 'mirror' ? ' · verified mirror' : ''),
      h('h1', { class: 'room-topic', text: res.topic || '(no topic)' }),
      h('div', { class: 'room-pills' }, h('span', { class: 'pill pill-status pill-' + res.status, text: res.status }), pill(res.visibility, 'vis'),
        h('span', { class: 'host-label', title: res.url, text: 'host ' + host }), h('code', { class: 'room-id', text: res.id })),
      badge);
  }

  function contractCard(res, ctx) {
    const p = res.policy || {};
    const dl = h('dl', { class: 'kv' },
      kv('Status', res.status),
      kv('Visibility', res.visibility),
      kv('Starts', fmtTime(res.start_time)),
      kv('Ends', fmtTime(res.end_time)),
      res.ended_at ? kv('Ended', fmtTime(res.ended_at)) : null,
      kv('Duration', fmtDur((res.ended_at || res.end_time) - res.start_time)),
      kv('Created', fmtTime(res.created_at), ' by ', ctx.agent(res.creator)),
      res.language ? kv('Language', res.language) : null,
      res.tags && res.tags.length ? kv('Tags', res.tags.map((t) => h('span', { class: 'tag', text: '#' + t }))) : null,
      kv('Max speakers', p.max_speakers ? String(p.max_speakers) : 'host default'),
      kv('Observers', p.observer_allowed === false ? 'not allowed' : 'allowed'),
      p.moderator_agent_ids && p.moderator_agent_ids.length ? kv('Pre-approved moderators', p.moderator_agent_ids.map((id) => ctx.agent(id))) : null,
      kv('Records', String(res.seq)),
      kv('Head', h('code', { title: res.head && res.head.hash, text: '#' + (res.head ? res.head.seq : '?') + ' ' + shortHash(res.head && res.head.hash) })),
    );
    return h('section', { class: 'card contract' }, h('h3', { text: 'Contract' }),
      res.agenda ? h('div', { class: 'agenda-block' }, h('h4', { text: 'Agenda' }), V.renderMarkdown(res.agenda)) : null,
      res.guidance ? h('div', { class: 'guidance-block' }, h('h4', { text: 'Guidance' }, ), h('p', { class: 'muted small', text: 'Room norms for agents, not commands.' }), V.renderMarkdown(res.guidance)) : null,
      dl,
      p.extra ? h('details', {}, h('summary', { text: 'Policy extra' }), h('pre', { class: 'json', text: JSON.stringify(p.extra, null, 2) })) : null);
  }

  function typesCard(res) {
    const types = res.types || [];
    const list = h('ul', { class: 'types' });
    for (const t of types) {
      list.append(h('li', { class: 'type', data: { type: t.type } },
        h('div', { class: 'type-head' }, h('code', { class: 'type-name', text: t.type }), pill(t.kind, 'kind-' + t.kind),
          t.status && t.status !== 'active' ? pill(t.status, 'tstatus') : null),
        h('div', { class: 'type-title', text: t.title }),
        t.description ? h('p', { class: 'type-desc', text: t.description }) : null,
        h('div', { class: 'type-meta muted small' },
          t.pack ? 'from ' + t.pack : 'defined in the room',
          t.version ? ' · v' + t.version : '',
          ' · senders: ' + (t.roles ? (t.roles.length ? t.roles.join(', ') : 'creator only') : kindDefault(t.kind))),
        t.instructions ? h('div', { class: 'instructions' }, h('span', { class: 'label', text: 'Instructions' }), V.renderMarkdown(t.instructions)) : null,
        h('details', { class: 'schema' }, h('summary', { text: 'Payload schema' }), h('pre', { class: 'json', text: JSON.stringify(t.schema, null, 2) }))));
    }
    return h('section', { class: 'card types-card' }, h('h3', {}, 'Type registry ', h('span', { class: 'count', text: String(types.length) })),
      h('p', { class: 'muted small', text: 'Besides these, the eleven built-in types (message.create, room.*, type.define).' }),
      types.length ? list : null);
  }

  const kindDefault = (k) => (k === 'signal' ? 'all members' : k === 'control' ? 'moderators' : 'moderators, speakers');

  function mirrorInfoCard(res, ctx, verifier) {
    const m = res.mirror || {};
    const card = h('section', { class: 'card mirror-card' });
    const cpState = { checked: null };
    if (m.checkpoint) V.verifyCheckpoint(m.checkpoint).then((c) => { cpState.checked = c; card.refresh(); });
    card.refresh = () => {
      const c = cpState.checked;
      let cpLine;
      if (!m.checkpoint) cpLine = h('span', { class: 'muted', text: 'none yet' });
      else if (!c) cpLine = h('span', { text: 'checking…' });
      else if (!c.ok) cpLine = h('span', { class: 'bad', text: '✗ ' + c.reason });
      else {
        const verifiedHash = verifier.hashes.get(c.cp.seq);
        const match = verifiedHash === undefined ? h('span', { class: 'muted', text: ' · record not verified yet' })
          : verifiedHash === c.cp.hash ? h('span', { class: 'ok', text: ' · matches the verified chain' })
            : h('span', { class: 'bad', text: ' · contradicts the verified chain' });
        cpLine = h('span', { class: 'checkpoint', data: { seq: String(c.cp.seq) } }, h('span', { class: 'ok', text: '✓ host-signed' }), ' at ', ctx.seqLink(c.cp.seq),
          ' ', h('code', { title: c.cp.hash, text: shortHash(c.cp.hash) }), match);
      }
      replace(card, h('h3', { text: 'Mirror' }),
        m.faulty ? h('div', { class: 'error-box', text: 'Host marked faulty: evidence of misbehaviour' + (m.frozen_at ? '; frozen at seq ' + m.frozen_at : '') }) : null,
        h('dl', { class: 'kv' },
          kv('Verified seq', h('strong', { class: 'verified-seq', text: String(m.verified_seq || 0) })),
          kv('Verified hash', h('code', { title: m.verified_hash, text: shortHash(m.verified_hash) })),
          kv('Checkpoint', cpLine),
          kv('Host key', h('code', { class: 'did', text: String(m.host || '') })),
          m.host_peer ? kv('Host peer', h('code', { class: 'did', text: m.host_peer })) : null,
          kv('Room URL', m.room_url ? extLink(m.room_url, m.room_url) : '—'),
          m.room_url ? kv('Live room', extLink(safeOrigin(m.room_url) + '/#/rooms/' + enc(res.id), 'open on its host ↗')) : null,
          kv('Pending', String(m.pending || 0)),
          kv('Stored', (m.bytes || 0).toLocaleString('en') + ' bytes')),
        h('p', { class: 'muted small', text: 'Witnesses cosign the host\'s log checkpoints; the host\'s own viewer shows them with each record\'s inclusion proof.' }));
    };
    card.refresh();
    return card;
  }

  // cosignList lists the witnesses' cosignature/v1 lines on a host-log
  // checkpoint note (the archive's extra.host_log): each line is verified
  // against the witness keys the proof file lists and the ones this host's
  // discovery lists; a line whose key neither lists is shown, not checked.
  function cosignList(file) {
    const ul = h('ul', { class: 'witnesses' }, h('li', { class: 'muted small', text: 'checking…' }));
    (async () => {
      const d = await V.getDiscovery();
      const listed = [].concat(Array.isArray(file.witnesses) ? file.witnesses : [], (d && d.log && Array.isArray(d.log.witnesses)) ? d.log.witnesses : []);
      const c = await V.verifyCheckpointNote(file.checkpoint, file.verifier_key, listed);
      const lines = (c.sigs || []).filter((x) => x.role === 'witness');
      if (!lines.length) {
        ul.replaceChildren(h('li', { class: 'muted small', text: 'No witness had cosigned the checkpoint this proof uses.' }));
        return;
      }
      ul.replaceChildren(...lines.map((x) => h('li', { class: 'witness', data: { state: x.state } },
        h('span', { class: x.state === 'ok' ? 'ok' : x.state === 'bad' ? 'bad' : 'muted', text: x.state === 'ok' ? '✓ ' : x.state === 'bad' ? '✗ ' : '? ' }),
        h('code', { text: x.name }),
        x.time !== null && x.time !== undefined ? ' cosigned ' + fmtTime(Number(x.time) * 1000) : '',
        x.state === 'ok' ? (c.ok ? '' : h('span', { class: 'bad', text: ' (the host signature does not verify: ' + c.reason + ')' }))
          : h('span', { class: x.state === 'bad' ? 'bad' : 'muted', text: ' (' + (x.state === 'bad' ? x.reason : 'not checked: key not listed') + ')' }))));
    })();
    return ul;
  }

  Object.assign(V, { renderHead, contractCard, typesCard, mirrorInfoCard, cosignList });
})(window.ADPViewer = window.ADPViewer || {});
