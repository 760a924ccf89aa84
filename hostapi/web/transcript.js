// The transcript of a room page: records from history and the live stream
// taken in any order and rendered in seq order, handed to the chain
// verifier, and reactions shown on their targets. A reaction.create whose
// target row is on the page is folded into that row's aggregate ("agree
// ×3"); its raw row comes back with the "show raw reaction rows" toggle
// (remembered in localStorage). A reaction whose target is not on the page
// stays a raw row.
(function (V) {
  'use strict';

  const { h, api, withQ, shortAgent, renderRecord, reactionLabel } = V;

  const RAW_KEY = 'adp-viewer.raw-reactions';
  const readRawPref = () => {
    try {
      return localStorage.getItem(RAW_KEY) === '1';
    } catch (e) {
      return false;
    }
  };
  const writeRawPref = (on) => {
    try {
      if (on) localStorage.setItem(RAW_KEY, '1');
      else localStorage.removeItem(RAW_KEY);
    } catch (e) { /* storage unavailable: the toggle lasts for this page */ }
  };

  // transcriptView(rp, hooks): hooks are onRecord(rec, fx) after each
  // record is rendered, onBatch() after each ingest, and onRestricted()
  // when the host keeps the records for members.
  function transcriptView(rp, hooks) {
    const { src, model, verifier, ctx, state } = rp;
    const el = h('ol', { class: 'transcript', id: 'transcript' });
    const pending = new Map(); // seq -> record not yet contiguous
    const articles = new Map(); // seq -> row
    const pollViews = new Map(); // poll seq -> update fn
    const folded = new Map(); // reaction seq -> target seq, for rows shown on their target
    let historyRunning = null;
    let historyRetries = 0;

    let showRaw = readRawPref();
    const toggle = h('a', { class: 'raw-toggle', role: 'button', on: { click: () => setRaw(!showRaw), keydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); setRaw(!showRaw); } } } });
    toggle.tabIndex = 0;
    function setRaw(on) {
      showRaw = on;
      writeRawPref(on);
      refreshToggle();
    }
    function refreshToggle() {
      el.classList.toggle('raw-reactions', showRaw);
      toggle.hidden = !folded.size;
      toggle.textContent = showRaw ? 'hide raw reaction rows' : `show raw reaction rows (${folded.size})`;
      toggle.setAttribute('aria-pressed', String(showRaw));
    }
    refreshToggle();

    // ingest takes a record from history or the live stream, in any order.
    function ingest(rec) {
      if (!rec || typeof rec.seq !== 'number') return;
      if (rec.seq <= model.lastSeq) {
        const had = model.bySeq.get(rec.seq);
        if (had && had.hash !== rec.hash) verifier.fail(rec.seq, 'the host served two different records for this seq');
        return;
      }
      pending.set(rec.seq, rec);
      const batch = [];
      while (pending.has(model.lastSeq + 1)) {
        const next = pending.get(model.lastSeq + 1);
        pending.delete(next.seq);
        render(next);
        batch.push(next);
      }
      if (batch.length) verifier.add(batch);
      if (pending.size && !historyRunning) rp.timer(() => { if (pending.size) loadHistory(); }, 300);
      hooks.onBatch();
    }

    function render(rec) {
      const fx = model.apply(rec);
      let art;
      try {
        art = renderRecord(rec, ctx, pollViews);
      } catch (err) {
        // A rendering bug must not stop the transcript: show the raw event.
        console.error('render seq', rec.seq, err);
        art = h('li', { class: 'rec rec-custom', id: 'rec-' + rec.seq, data: { seq: String(rec.seq) } },
          h('header', { class: 'rec-head' }, ctx.seqLink(rec.seq)),
          h('pre', { class: 'json', text: JSON.stringify(rec.envelope && rec.envelope.event, null, 2) }));
      }
      articles.set(rec.seq, art);
      el.append(art);
      if (fx.target) {
        // Fold the row into its target's aggregate when the target row is
        // here and is not itself folded.
        if (articles.has(fx.target) && !folded.has(fx.target)) {
          folded.set(rec.seq, fx.target);
          art.classList.add('rec-folded');
          refreshToggle();
        }
        updateReactions(fx.target);
      }
      if (fx.poll && pollViews.has(fx.poll)) pollViews.get(fx.poll)();
      hooks.onRecord(rec, fx);
    }

    function updateReactions(seq) {
      const art = articles.get(seq);
      if (!art) return;
      let bar = art.querySelector(':scope > .reactions');
      if (!bar) {
        bar = h('div', { class: 'reactions' });
        art.append(bar);
      }
      bar.replaceChildren();
      for (const [reaction, actors] of model.reactions.get(seq) || []) {
        bar.append(h('span', { class: 'reaction', title: reaction + ' — ' + Array.from(actors).map(shortAgent).join(', '), data: { reaction } },
          h('span', { class: 'reaction-name', text: reactionLabel(reaction) }), ' ',
          h('span', { class: 'reaction-times' }, '×', h('span', { class: 'reaction-count', text: String(actors.size) }))));
      }
    }

    async function loadHistory() {
      if (historyRunning) return historyRunning;
      historyRunning = (async () => {
        try {
          for (let guard = 0; guard < 10000 && !state.destroyed; guard++) {
            const res = await api(withQ(src, src.events + '?limit=1000&after_seq=' + model.lastSeq));
            const recs = res.result || [];
            recs.forEach(ingest);
            if (!res.next_cursor || !recs.length) break;
          }
          if (!model.lastSeq) hooks.onBatch();
        } catch (err) {
          if (err.code === 'membership_required') {
            const res = rp.resource;
            rp.notice.append(h('div', { class: 'notice' }, 'The records of this ', h('strong', { text: res ? res.visibility : '' }), ' room are for its members; only its contract is public.'));
            const badge = rp.badge;
            badge.dataset.state = 'unavailable';
            badge.querySelector('.badge-icon').textContent = '–';
            badge.querySelector('.badge-text').textContent = 'No records to verify';
            hooks.onRestricted();
          } else {
            rp.notice.append(V.errorBox(err, 'Could not load the records.'));
          }
        } finally {
          historyRunning = null;
          if (pending.size && !state.destroyed && ++historyRetries < 20) rp.timer(loadHistory, 500);
        }
      })();
      return historyRunning;
    }

    // articleAt returns the row to focus for seq: a folded reaction's
    // target while raw rows are hidden.
    function articleAt(seq) {
      if (folded.has(seq) && !showRaw) return articles.get(folded.get(seq));
      return articles.get(seq);
    }

    function markBad(seq) {
      const a = articles.get(seq);
      if (a) a.classList.add('rec-bad');
    }

    return { el, toggle, ingest, loadHistory, articleAt, markBad, rowAt: (seq) => articles.get(seq) };
  }

  Object.assign(V, { transcriptView });
})(window.ADPViewer = window.ADPViewer || {});
