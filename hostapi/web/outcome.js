// The outcome page of an ended room: its archive, verified here, with
// stats, poll results, counts, members and witnesses.
(function (V) {
  'use strict';

  const { h, replace, getDiscovery, kv, fmtTime, fmtDur, pill, api, errorBox, routeOf, download, RoomModel, makeBadge, agentChip, pollView, cosignList } = V;

  // ---------------------------------------------------------------- outcome page

  // MAX_ROOT_RECORDS bounds the archive_root recomputation (two SHA-256
  // per record).
  const MAX_ROOT_RECORDS = 50000;

  // archiveLogProof checks the archive's embedded proof file of its last
  // record (extra.host_log): its verifier key is the room's host's log
  // key, its checkpoint is signed by it, its record hash is the last
  // record's and its inclusion proof leads to the checkpoint's root. The
  // host's log key is this node's (discovery) for a room it hosts; for a
  // room it mirrors (hostKey: the mirror's "host"), the key the file
  // names, accepted only when it is that host's key.
  function archiveLogProof(file, last, hostKey) {
    const el = h('span', { class: 'archive-log', data: { state: 'pending' }, text: 'checking…' });
    const done = (state, ...c) => {
      el.dataset.state = state;
      replace(el, c);
    };
    if (!file) {
      done('none', h('span', { class: 'muted', text: 'none (no checkpoint covered the last record when the archive was served)' }));
      return el;
    }
    (async () => {
      let log;
      if (hostKey) {
        log = { verifier_key: file.verifier_key, witnesses: [] };
      } else {
        const d = await getDiscovery();
        log = d && d.log;
        if (!log || !log.verifier_key) return done('unchecked', h('span', { class: 'muted', text: 'not checked: this host names no log key' }));
        if (file.verifier_key !== log.verifier_key) return done('bad', h('span', { class: 'bad', text: '✗ signed by another log key than discovery\'s' }));
      }
      if (!last || file.record_hash !== last.hash) return done('bad', h('span', { class: 'bad', text: '✗ the proof is not for the archive\'s last record' }));
      const c = await V.verifyCheckpointNote(file.checkpoint, log.verifier_key, log.witnesses);
      if (!c.ok) return done('bad', h('span', { class: 'bad', text: '✗ checkpoint: ' + c.reason }));
      if (hostKey && c.hostKey !== hostKey) return done('bad', h('span', { class: 'bad', text: '✗ signed by another key than the room\'s host\'s' }));
      const why = await V.verifyInclusion(file.record_hash, file.inclusion, c.cp);
      if (why) return done('bad', h('span', { class: 'bad', text: '✗ ' + why }));
      done('ok', h('span', { class: 'ok', text: '✓ ' }), 'record #' + last.seq + ' is leaf ' + file.inclusion.leaf_index + ' of the host-signed checkpoint of size ' + c.cp.sizeText);
    })();
    return el;
  }

  function outcomePage(src) {
    const page = h('section', { class: 'page outcome', data: { room: src.id, source: src.kind } });
    const badge = makeBadge();
    const head = h('header', { class: 'room-head' }, h('h1', { class: 'room-topic', text: 'Loading outcome…' }));
    const body = h('div', { class: 'outcome-body' });
    page.append(head, body);
    V.app.append(page);
    let destroyed = false;
    let logCheck = null;

    (async () => {
      let res, arch;
      try {
        res = await api(src.room);
      } catch (err) {
        head.replaceChildren(h('h1', { class: 'room-topic', text: 'Room unavailable' }));
        body.append(errorBox(err));
        return;
      }
      if (res.status !== 'ended') {
        head.replaceChildren(h('div', { class: 'crumbs' }, h('a', { href: routeOf(src), text: '← Room' })), h('h1', { class: 'room-topic', text: res.topic }));
        body.append(h('div', { class: 'notice' }, res.status === 'cancelled' ? 'This room was cancelled; cancelled rooms have no outcome.' : 'This room has not ended yet; its outcome appears once it has. ',
          h('a', { href: routeOf(src), text: 'Follow it live →' })));
        return;
      }
      try {
        arch = await api(src.archive);
      } catch (err) {
        head.replaceChildren(h('h1', { class: 'room-topic', text: res.topic }));
        body.append(errorBox(err, 'Could not load the archive.'));
        return;
      }
      if (destroyed) return;
      const room = arch.room || res;
      const man = arch.manifest || {};
      const records = Array.isArray(arch.records) ? arch.records : [];
      const model = new RoomModel();
      records.forEach((r) => model.apply(r));
      const ctx = {
        src, model,
        agent: (id) => agentChip(src, model, id),
        seqLink: (seq) => h('a', { class: 'seqref', href: routeOf(src, '/seq/' + seq), text: '#' + seq }),
      };
      // The archive's own digests, checked once the chain has verified.
      const extra = { pending: true };
      const verifier = new V.ChainVerifier(src.id, () => badge.update(verifier, records.length, extra));
      const last = records[records.length - 1];
      let manifestFail = null;
      try {
        if (man.events_sha3_256 !== V.eventsDigest(records)) manifestFail = 'events_sha3_256 does not match the records';
        else if (last && man.last_hash !== last.hash) manifestFail = 'manifest last_hash does not match the last record';
        else if (man.event_count !== records.length) manifestFail = 'manifest event_count does not match';
      } catch (e) {
        manifestFail = 'records cannot be canonicalized';
      }
      // The host log: every record of the archive proved against the
      // latest checkpoint (bounded per page), and the archive's own
      // embedded proof of its last record (extra.host_log).
      const hashAtSeq = (seq) => verifier.hashes.get(seq);
      let logEl = null;
      if (src.kind === 'local') {
        logCheck = new V.LogCheck(() => { if (logEl) logEl.refresh(); });
        logEl = V.logCard(logCheck, hashAtSeq, 'records of the archive');
        logCheck.add(records);
      }
      verifier.add(records).then(async () => {
        if (logEl) logEl.refresh();
        // archive_root is the RFC 6962 root over the record hashes (or,
        // in archives made before the host log, events_sha3_256).
        let rootNote = '';
        if (!manifestFail && man.archive_root && man.archive_root !== man.events_sha3_256) {
          if (records.length > MAX_ROOT_RECORDS) rootNote = ' · archive_root not recomputed (over ' + MAX_ROOT_RECORDS + ' records)';
          else if ((await V.merkleRoot(records.map((r) => r.hash))) !== man.archive_root) manifestFail = 'archive_root is not the RFC 6962 root of the records';
          else rootNote = ' · archive_root matches';
        }
        extra.pending = false;
        if (manifestFail) extra.fail = { seq: last ? last.seq : 0, reason: manifestFail };
        else extra.okNote = 'events_sha3_256 matches' + rootNote;
        badge.update(verifier, records.length, extra);
      });

      const closeRec = records.find((r) => r.envelope && r.envelope.event && r.envelope.event.type === 'room.close');
      const endedAt = room.ended_at || (closeRec && closeRec.received_at) || room.end_time;
      const startedAt = room.start_time;
      const messages = model.counts.get('message.create') || 0;
      const members = model.memberList();

      head.replaceChildren(
        h('div', { class: 'crumbs' }, h('a', { href: '#/', text: '← Directory' }), ' · ', h('a', { href: routeOf(src), text: 'transcript' })),
        h('h1', { class: 'room-topic', text: room.topic || '(no topic)' }),
        h('div', { class: 'room-pills' }, pill('ended'), pill(room.visibility, 'vis'), h('span', { class: 'host-label', text: 'host ' + (man.host || '?') }), h('code', { class: 'room-id', text: src.id })),
        badge);

      const stat = (label, value, cls) => h('div', { class: 'stat ' + (cls || '') }, h('div', { class: 'stat-value', text: value }), h('div', { class: 'stat-label', text: label }));
      body.append(h('div', { class: 'stats' },
        stat('duration', fmtDur(endedAt - startedAt), 'stat-duration'),
        stat('members', String(members.length), 'stat-members'),
        stat('messages', String(messages), 'stat-messages'),
        stat('records', String(records.length), 'stat-records'),
        stat('polls', String(model.polls.size), 'stat-polls')));
      body.append(h('p', { class: 'muted', text: `${fmtTime(startedAt)} → ${fmtTime(endedAt)}` }));

      const dl = h('div', { class: 'downloads' }, h('span', { text: 'Download the archive: ' }),
        src.downloads.map(([label, path, ext]) => download(path, label, `room-${src.id}.${ext}`)));
      body.append(dl);

      const grid = h('div', { class: 'outcome-grid' });
      body.append(grid);

      // Poll results.
      const polls = h('section', { class: 'card polls-card' }, h('h3', { text: 'Poll results' }));
      if (!model.polls.size) polls.append(h('p', { class: 'muted', text: 'No polls.' }));
      for (const poll of model.polls.values()) {
        const v = pollView(poll, model);
        polls.append(h('div', { class: 'poll-result' }, h('div', { class: 'muted small' }, 'asked by ', ctx.agent(poll.actor), ' in ', ctx.seqLink(poll.seq)), v.el));
      }
      grid.append(polls);

      // Counts by type.
      const reg = new Map((room.types || []).map((t) => [t.type, t]));
      const counts = Array.from(model.counts.entries()).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
      const table = h('table', { class: 'counts' }, h('thead', {}, h('tr', {}, h('th', { text: 'Type' }), h('th', { text: 'Kind' }), h('th', { text: 'Records' }))),
        h('tbody', {}, counts.map(([t, n]) => h('tr', { data: { type: t } }, h('td', {}, h('code', { text: t }), reg.get(t) ? h('span', { class: 'muted small', text: ' ' + reg.get(t).title }) : null),
          h('td', { text: reg.get(t) ? reg.get(t).kind : 'built-in' }), h('td', { class: 'num', text: String(n) })))));
      grid.append(h('section', { class: 'card counts-card' }, h('h3', { text: 'Records by type' }), table));

      // Members.
      const mt = h('table', { class: 'members-table' }, h('thead', {}, h('tr', {}, ['Agent', 'Role', 'Perspective', 'Joined', 'Messages', 'Status'].map((x) => h('th', { text: x })))),
        h('tbody', {}, members.map((m) => h('tr', { data: { agent: m.agent_id } },
          h('td', {}, ctx.agent(m.agent_id)), h('td', { text: m.role + (m.creator ? ' (creator)' : '') }),
          h('td', {}, m.perspective ? V.renderInline(m.perspective) : ''), h('td', {}, ctx.seqLink(m.joined_seq)),
          h('td', { class: 'num', text: String(m.messages) }), h('td', { text: m.removed ? (m.banned ? 'banned' : 'removed') : m.left ? 'left' : 'member' })))));
      grid.append(h('section', { class: 'card members-card wide' }, h('h3', { text: 'Members' }), mt));

      // Manifest and witnesses.
      const ex = man.extra || {};
      if (logEl) grid.append(logEl);
      grid.append(h('section', { class: 'card manifest-card wide' }, h('h3', { text: 'Archive' }),
        h('dl', { class: 'kv' },
          kv('Generated', fmtTime(man.generated_at)),
          kv('Seq range', `${man.first_seq}–${man.last_seq}`),
          kv('Last hash', h('code', { text: String(man.last_hash) })),
          kv('events_sha3_256', h('code', { text: String(man.events_sha3_256) })),
          kv('archive_root', h('code', { text: String(man.archive_root) })),
          ex.host_key ? kv('Host key', h('code', { class: 'did', text: String(ex.host_key) })) : null,
          kv('extra.host_log', archiveLogProof(ex.host_log, last, src.kind === 'mirror' ? String((res.mirror && res.mirror.host) || '-') : ''))),
        h('h4', { text: 'Witnesses' }),
        ex.host_log && ex.host_log.checkpoint ? cosignList(ex.host_log) : h('p', { class: 'muted small', text: 'This archive carries no host-log checkpoint, so no witness cosignatures.' })));
    })();

    return { destroy() { destroyed = true; if (logCheck) logCheck.destroy(); } };
  }

  Object.assign(V, { outcomePage });
})(window.ADPViewer = window.ADPViewer || {});
