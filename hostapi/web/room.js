// The room page: it composes the header and side cards (cards.js), the
// members panel (members.js), the transcript (transcript.js) and the live
// stream (live.js), and owns what ties them together: the room resource
// (re-read after records), the end of the room, and focus on one record
// or member (#/rooms/<id>/seq/<n>, …/member/<did>).
(function (V) {
  'use strict';

  const { h, api, shortHash, routeOf, getDiscovery, errorBox, RoomModel, makeBadge, agentChip,
    renderHead, contractCard, typesCard, mirrorInfoCard, membersPanel, transcriptView, liveStream } = V;

  // roomContext is what record rendering needs from the page: links to
  // agents and records of this source.
  function roomContext(src, model) {
    const ctx = {
      src, model,
      agent: (id, opts) => agentChip(src, model, id, opts),
      seqLink: (seq) => h('a', { class: 'seqref', href: routeOf(src, '/seq/' + seq), text: '#' + seq }),
      hashLink: (hash) => {
        const s = model.seqOf(hash);
        return s ? ctx.seqLink(s) : h('span', { class: 'seqref missing', title: hash, text: shortHash(hash) });
      },
    };
    return ctx;
  }

  // roomSide is the side column: the mirror card (mirrors), the contract,
  // the members panel and the type registry, redrawn from each fresh room
  // resource.
  function roomSide(rp, members, logEl) {
    const el = h('aside', { class: 'side' });
    let contractEl = null;
    let typesEl = null;
    let mirrorCard = null;
    const rounds = V.roundsCard(rp);

    function show(res) {
      contractEl = contractCard(res, rp.ctx);
      typesEl = typesCard(res);
      if (rp.src.kind === 'mirror') {
        mirrorCard = mirrorInfoCard(res, rp.ctx, rp.verifier);
        el.append(mirrorCard);
      }
      const extra = res.policy && res.policy.extra && typeof res.policy.extra === 'object' ? res.policy.extra : {};
      const sealed = extra.confidentiality === 'member-only' ? V.sealedCard(rp) : null;
      el.append(contractEl, logEl || mirrorLogNote(), rounds, sealed || '', members.el, typesEl);
    }

    function update(res) {
      const contract = contractCard(res, rp.ctx);
      contractEl.replaceWith(contract);
      contractEl = contract;
      const types = typesCard(res);
      if (types.textContent !== typesEl.textContent) {
        typesEl.replaceWith(types);
        typesEl = types;
      }
      if (mirrorCard) {
        const mc = mirrorInfoCard(res, rp.ctx, rp.verifier);
        mirrorCard.replaceWith(mc);
        mirrorCard = mc;
      }
    }

    const refreshMirror = () => { if (mirrorCard) mirrorCard.refresh(); };

    return { el, show, update, refreshMirror, refreshRounds: () => rounds.refresh() };
  }

  function mirrorLogNote() {
    return h('section', { class: 'card log-card', data: { state: 'mirror' } }, h('h3', { text: 'Host log' }),
      h('p', { class: 'muted small', text: 'Not checked here: a mirrored room\'s records are in its host\'s log; open the room on its host to check them there.' }));
  }

  function roomPage(src, r) {
    const state = { destroyed: false, timers: new Set(), focus: null };
    const timer = (fn, ms) => {
      const t = setTimeout(() => { state.timers.delete(t); fn(); }, ms);
      state.timers.add(t);
    };
    const model = new RoomModel();
    const badge = makeBadge();
    const verifier = new V.ChainVerifier(src.id, () => refreshBadge());
    // The host log proves the records of rooms hosted here; a mirror's
    // records are in their host's log, which this page cannot reach.
    const logCheck = src.kind === 'local' ? new V.LogCheck(() => logChanged()) : null;
    const hashAt = (seq) => verifier.hashes.get(seq);
    const logEl = logCheck ? V.logCard(logCheck, hashAt, 'records') : null;
    const notice = h('div', { class: 'notices' });
    // rp is the page the parts share.
    const rp = { src, model, verifier, badge, notice, state, timer, ctx: roomContext(src, model), resource: null };

    const members = membersPanel(rp, { onRender: () => { if (state.focus && state.focus.agent) applyFocus(); } });
    const transcript = transcriptView(rp, { onRecord, onBatch: refreshBadge, onRestricted: () => members.hide() });
    const live = liveStream(rp, { onRecord: transcript.ingest, onOpen: transcript.loadHistory, onEnded: roomFinished });

    const side = roomSide(rp, members, logEl);
    const head = h('header', { class: 'room-head' }, h('h1', { class: 'room-topic', text: 'Loading room…' }));
    V.app.append(h('section', { class: 'page room', data: { room: src.id, source: src.kind } }, head,
      h('div', { class: 'room-grid' },
        h('div', { class: 'main-col' }, notice,
          h('div', { class: 'transcript-head' }, h('h2', { text: 'Transcript' }), live.el, transcript.toggle), transcript.el),
        side.el)));

    function refreshBadge() {
      badge.update(verifier, model.lastSeq);
      if (verifier.state === 'fail') transcript.markBad(verifier.failSeq);
      side.refreshMirror();
      logChanged();
    }

    // logChanged redraws the host log card and the records' log marks
    // (at most every 100 ms).
    let logTimer = false;
    function logChanged() {
      if (!logCheck || logTimer || state.destroyed) return;
      logTimer = true;
      timer(() => {
        logTimer = false;
        for (const seq of logCheck.entries.keys()) V.setMark(transcript.rowAt(seq), logCheck.mark(seq, hashAt));
        logEl.refresh();
      }, 100);
    }

    // onRecord runs after each record is rendered.
    function onRecord(rec, fx) {
      if (logCheck) logCheck.add([rec]);
      if (fx.membership) members.changed();
      if (fx.round) side.refreshRounds();
      if (rp.resource) resourceChanged();
      const ev = rec.envelope.event;
      if (ev.type === 'room.close' || ev.type === 'room.cancel') roomFinished(ev.type === 'room.close' ? 'ended' : 'cancelled');
      if (state.focus && state.focus.seq === rec.seq) applyFocus();
    }

    function setStatusPill(status) {
      const st = head.querySelector('.pill-status');
      if (st && status) {
        st.textContent = status;
        st.className = 'pill pill-status pill-' + status;
      }
    }

    let finished = false;
    function roomFinished(status) {
      live.stop('ended', status === 'cancelled' ? 'cancelled' : 'ended');
      if (finished) return;
      finished = true;
      setStatusPill(status);
      transcript.loadHistory();
      if (status !== 'cancelled') {
        notice.append(h('div', { class: 'notice notice-ended' }, 'This room has ended. ',
          h('a', { href: routeOf(src, '/outcome'), text: 'See its outcome and download the archive →' })));
      }
    }

    // The room resource, re-read after new records: contract updates, head,
    // status and (for mirrors) the verified seq and checkpoint. The host's
    // claimed head must agree with the chain verified here.
    let resourceTimer = false;
    function resourceChanged() {
      if (resourceTimer) return;
      resourceTimer = true;
      timer(async () => {
        resourceTimer = false;
        let res;
        try {
          res = await api(src.room);
        } catch (e) {
          return;
        }
        if (state.destroyed) return;
        rp.resource = res;
        verifier.expectHead(res.seq, res.hash);
        side.update(res);
        if (!finished) setStatusPill(res.status);
        if (res.status === 'ended' || res.status === 'cancelled') roomFinished(res.status);
      }, 400);
    }

    function setFocus(rt) {
      const [, , kind, val] = rt.parts;
      state.focus = kind === 'seq' ? { seq: parseInt(val, 10) } : kind === 'member' ? { agent: val } : null;
      applyFocus();
    }
    function applyFocus() {
      const f = state.focus;
      if (!f) return;
      let target = null;
      if (f.seq) target = transcript.articleAt(f.seq);
      if (f.agent) target = members.find(f.agent);
      if (!target) return;
      state.focus = null;
      document.querySelectorAll('.focused').forEach((e) => e.classList.remove('focused'));
      target.classList.add('focused');
      target.scrollIntoView({ block: 'center' });
    }

    (async () => {
      let resource;
      try {
        resource = await api(src.room);
      } catch (err) {
        head.replaceChildren(h('h1', { class: 'room-topic', text: 'Room unavailable' }));
        notice.append(errorBox(err, src.kind === 'mirror' ? 'This node does not mirror that room.' : 'This host cannot show that room.'));
        badge.remove();
        return;
      }
      if (state.destroyed) return;
      rp.resource = resource;
      const disc = await getDiscovery();
      renderHead(head, resource, src, disc, badge);
      side.show(resource);
      await members.load();
      verifier.expectHead(resource.seq, resource.hash);
      if (r) setFocus(r);
      if (resource.status === 'ended' || resource.status === 'cancelled') {
        roomFinished(resource.status);
        return;
      }
      // Status changes without a record (scheduled -> active -> ended by the
      // clock) show up within half a minute.
      // Deadlines pass without a record: redraw the rounds every 30 s.
      const roundsTick = () => {
        side.refreshRounds();
        timer(roundsTick, 30000);
      };
      timer(roundsTick, 30000);
      const tick = () => {
        if (finished) return;
        resourceChanged();
        timer(tick, 30000);
      };
      timer(tick, 30000);
      const liveable = (resource.status === 'active' || resource.status === 'scheduled') && (src.kind === 'mirror' || resource.visibility === 'public');
      if (liveable) {
        live.connect();
      } else {
        live.set('off', 'not live');
        transcript.loadHistory();
      }
    })();

    return {
      handles: (rt) => rt.parts[0] === (src.kind === 'local' ? 'rooms' : 'mirrors') && rt.parts[1] === src.id && rt.parts[2] !== 'outcome',
      focus: setFocus,
      destroy() {
        state.destroyed = true;
        live.stop();
        if (logCheck) logCheck.destroy();
        for (const t of state.timers) clearTimeout(t);
      },
    };
  }

  Object.assign(V, { roomPage });
})(window.ADPViewer = window.ADPViewer || {});
