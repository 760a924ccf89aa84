// Coordination rounds and co-signed deal receipts, the packs adpnode
// bundles (adpnode:coordination/1.0, adpnode:deal/1.0). RoundsState derives
// each round's forward-only state from round.turn records in seq order,
// as the Go package adp/rounds does: a turn that would move a round back,
// skip a state or touch a final round is kept as ignored with its reason;
// a passed due is reported, never acted on. verifyReceipt checks a
// deal.receipt's two Ed25519 signatures in this browser, and receiptCounts
// whether it counts where it is, as Go's receipt.CheckIn does: in the room
// it names, for a round of that room agreed before it, signed by that
// round's two parties. Agent content is rendered as text only.
(function (V) {
  'use strict';

  const { h, fmtTime, extLink } = V;

  const RANK = { open: 0, agreed: 1, confirmed: 2, delivered: 3, completed: 4, cancelled: 4 };
  const TARGET = { counter: 'open', accept: 'agreed', confirm: 'confirmed', deliver: 'delivered', complete: 'completed', cancel: 'cancelled' };
  const NEED = { open: 'open', agreed: 'open', confirmed: 'agreed', delivered: 'confirmed', completed: 'delivered' };
  const isFinal = (s) => s === 'completed' || s === 'cancelled';
  const str = (v) => (typeof v === 'string' ? v : '');
  const list = (v) => (Array.isArray(v) ? v.filter((o) => o && typeof o === 'object') : []);

  // RoundsState folds round.turn records, in seq order, into rounds.
  class RoundsState {
    constructor() {
      this.rounds = [];
      this.byId = new Map();
    }

    // apply folds one turn {seq, hash, actor, payload} and returns its step:
    // {seq, type, round, from, to, ignored, reason}.
    apply(t) {
      const p = t.payload && typeof t.payload === 'object' ? t.payload : {};
      const step = { seq: t.seq, type: str(p.type), actor: t.actor, round: null, from: '', to: '', ignored: false, reason: '' };
      if (p.type === 'propose') {
        if (this.byId.has(t.hash) || p.ref) {
          Object.assign(step, { ignored: true, reason: 'a propose opens a new round and names none' });
          return step;
        }
        const r = { id: t.hash, seq: t.seq, proposer: t.actor, goal: str(p.goal), state: 'open', options: [], optionsBy: '', recommend: '',
          choice: '', acceptBy: '', agreedSeq: 0, delivered: [], deliverBy: '', due: 0, onTimeout: '', steps: [] };
        offer(r, t.actor, p);
        this.rounds.push(r);
        this.byId.set(t.hash, r);
        Object.assign(step, { round: r, from: 'open', to: 'open' });
        r.steps.push(step);
        return step;
      }
      const r = this.byId.get(p.ref);
      if (!r) {
        Object.assign(step, { ignored: true, reason: 'ref names no earlier propose' });
        return step;
      }
      const why = next(r, t.actor, p);
      Object.assign(step, { round: r, from: r.state, to: r.state });
      if (why.reason) Object.assign(step, { ignored: true, reason: why.reason });
      else {
        applyTurn(r, t, p, why.to);
        step.to = why.to;
      }
      r.steps.push(step);
      return step;
    }
  }

  function offer(r, actor, p) {
    r.options = list(p.options);
    r.optionsBy = actor;
    r.recommend = str(p.recommend);
    if (Number.isInteger(p.due)) setDue(r, p);
  }

  function setDue(r, p) {
    r.due = p.due;
    r.onTimeout = str(p.on_timeout) || 'hold';
  }

  const hasOption = (opts, id) => opts.some((o) => o.id === id);

  // next returns {to} or {reason} for a turn on round r.
  function next(r, actor, p) {
    if (isFinal(r.state)) return { reason: `the round is ${r.state} (final)` };
    if (p.type === 'cancel') return { to: 'cancelled' };
    const to = TARGET[p.type];
    if (!to) return { reason: 'unknown turn type ' + JSON.stringify(String(p.type)) };
    if (RANK[to] < RANK[r.state]) return { reason: `${p.type} would move the round back from ${r.state} to ${to}` };
    const need = to === 'delivered' && r.state === 'delivered' ? 'delivered' : NEED[to];
    if (r.state !== need) return { reason: `${p.type} needs the round ${need}, it is ${r.state}` };
    switch (p.type) {
      case 'counter':
        if (!list(p.options).length) return { reason: 'a counter carries options' };
        break;
      case 'accept':
        if (!hasOption(r.options, p.choice)) return { reason: `choice ${JSON.stringify(String(p.choice))} is not an option on the table` };
        if (actor === r.optionsBy) return { reason: 'an agent cannot accept its own offer' };
        break;
      case 'confirm':
        if (actor === r.acceptBy) return { reason: 'the accepting agent cannot confirm its own acceptance' };
        break;
      case 'deliver':
        if (!list(p.options).length) return { reason: 'a deliver carries deliverables (options)' };
        break;
      case 'complete':
        if (actor === r.deliverBy) return { reason: 'the delivering agent cannot complete its own delivery' };
        break;
    }
    return { to };
  }

  function applyTurn(r, t, p, to) {
    const actor = t.actor;
    if (p.type === 'counter') offer(r, actor, p);
    if (p.type === 'accept') Object.assign(r, { choice: p.choice, acceptBy: actor, agreedSeq: t.seq });
    if (p.type === 'deliver') Object.assign(r, { delivered: list(p.options), deliverBy: actor });
    if (p.type !== 'counter' && Number.isInteger(p.due)) setDue(r, p);
    r.state = to;
  }

  // notice reports a passed deadline at nowSec, or ''.
  function roundNotice(r, nowSec) {
    if (!r.due || nowSec <= r.due || isFinal(r.state)) return '';
    return 'deadline passed, on_timeout: ' + r.onTimeout;
  }

  // ---------------------------------------------------------------- receipts

  const RECEIPT_TYPE = 'adpnode.deal.receipt/1';
  const RECEIPT_FIELDS = ['type', 'partyA', 'partyB', 'termsHash', 'context', 'ref', 'ts', 'sigA', 'sigB'];

  function agentKey(id) {
    if (typeof id !== 'string' || !id.startsWith('did:agent:')) return null;
    const k = V.b64uDecode(id.slice(10));
    return k && k.length === 32 ? k : null;
  }

  // verifyReceipt checks a deal.receipt payload: its shape and both
  // signatures over "adpnode.deal.receipt/1" 0x00 JCS(receipt without
  // sigA, sigB). It resolves to null when valid, 'unsupported' when this
  // browser cannot verify Ed25519, or the reason.
  async function verifyReceipt(p) {
    if (!p || typeof p !== 'object' || Array.isArray(p)) return 'receipt is not an object';
    if (p.type !== RECEIPT_TYPE) return 'not an ' + RECEIPT_TYPE;
    const keys = Object.keys(p);
    if (keys.length !== RECEIPT_FIELDS.length || !RECEIPT_FIELDS.every((k) => keys.includes(k))) return 'receipt members are not ' + RECEIPT_FIELDS.join(', ');
    const a = agentKey(p.partyA);
    const b = agentKey(p.partyB);
    if (!a || !b) return 'a party is not a did:agent key';
    if (p.partyA === p.partyB) return 'partyA and partyB are the same agent';
    for (const f of ['termsHash', 'ref']) {
      const d = V.b64uDecode(p[f]);
      if (!d || d.length !== 32) return f + ' is not base64url of 32 bytes';
    }
    if (typeof p.context !== 'string' || !p.context) return 'context is empty';
    if (!Number.isInteger(p.ts) || p.ts < 0) return 'ts is not epoch seconds';
    if (!(await V.ed25519Available())) return 'unsupported';
    const unsigned = {};
    for (const k of RECEIPT_FIELDS) if (k !== 'sigA' && k !== 'sigB') unsigned[k] = p[k];
    const body = V.utf8(V.jcs(unsigned));
    const prefix = V.utf8(RECEIPT_TYPE);
    const msg = new Uint8Array(prefix.length + 1 + body.length);
    msg.set(prefix, 0);
    msg.set(body, prefix.length + 1);
    const bad = [];
    for (const [name, key, sig] of [['sigA', a, p.sigA], ['sigB', b, p.sigB]]) {
      const s = V.b64uDecode(sig);
      if (!s || s.length !== 64 || !(await V.verifySignature(key, msg, s))) bad.push(name + ': signature does not verify');
    }
    return bad.length ? bad.join('; ') : null;
  }

  // receiptCounts returns null when receipt p, found at seq in room roomId
  // whose rounds are rs (a RoundsState folded past seq, or null), counts
  // there, else why not: the rules of Go's receipt.Bind. Signatures are
  // verifyReceipt's.
  function receiptCounts(roomId, rs, seq, p) {
    if (p.context !== roomId) return `names another room: its context is ${JSON.stringify(String(p.context))}, not ${roomId}`;
    const r = rs ? rs.byId.get(p.ref) : null;
    if (!r) return 'names no round of this room: ref ' + String(p.ref);
    if (!r.acceptBy) return `names a round that was not agreed before it: round ${r.id} is ${r.state} and was never agreed`;
    if (!(r.agreedSeq < seq)) return `names a round that was not agreed before it: round ${r.id} was agreed at seq ${r.agreedSeq}, after it`;
    const pair = [r.optionsBy, r.acceptBy];
    if (!((p.partyA === pair[0] && p.partyB === pair[1]) || (p.partyA === pair[1] && p.partyB === pair[0]))) {
      return `is not signed by its round's two parties: round ${r.id} is between ${pair[0]} and ${pair[1]}`;
    }
    return null;
  }

  // checkReceipt is the viewer's verdict on receipt p at seq in room
  // roomId with rounds rs: {state: 'ok' | 'bad' | 'unsupported', text}.
  async function checkReceipt(roomId, rs, seq, p) {
    const sig = await verifyReceipt(p);
    if (sig === 'unsupported') return { state: 'unsupported', text: 'not checked: this browser cannot verify Ed25519' };
    if (sig !== null) return { state: 'bad', text: '✗ receipt signature invalid — ' + sig };
    const why = receiptCounts(roomId, rs, seq, p);
    if (why !== null) return { state: 'bad', text: '✗ receipt does not count here — ' + why };
    return { state: 'ok', text: '✓ co-signed: both signatures verify, by the two parties of an agreed round of this room' };
  }

  function showVerdict(status, v) {
    status.dataset.state = v.state;
    status.className = 'receipt-status' + (v.state === 'unsupported' ? '' : ' ' + v.state);
    status.textContent = v.text;
  }

  // ---------------------------------------------------------------- rendering

  function optionList(opts, r, ctx) {
    if (!opts.length) return null;
    return h('ul', { class: 'round-options' }, opts.map((o) => {
      const chosen = r && r.choice === o.id && r.state !== 'open';
      const review = o.review && typeof o.review === 'object' ? o.review : null;
      return h('li', { class: 'round-option' + (chosen ? ' chosen' : ''), data: { option: str(o.id) } },
        h('code', { text: str(o.id) }), ' ', h('strong', { text: str(o.title) }),
        chosen ? h('span', { class: 'pill pill-active', text: 'chosen' }) : null,
        r && r.recommend === o.id ? h('span', { class: 'muted small', text: ' (recommended)' }) : null,
        o.summary ? h('div', { class: 'plain small', text: str(o.summary) }) : null,
        o.fields && typeof o.fields === 'object' ? h('div', { class: 'muted small', text: Object.entries(o.fields).map(([k, v]) => k + ': ' + String(v)).join(' · ') }) : null,
        Array.isArray(o.refs) && o.refs.length ? h('div', { class: 'small' }, o.refs.map((u) => [extLink(str(u), str(u)), ' '])) : null,
        review ? h('div', { class: 'review review-' + str(review.verdict).replace(/[^a-z]/g, ''), text: 'review: ' + str(review.verdict) +
          (Number.isInteger(review.score) ? ' (' + review.score + ')' : '') + (review.reason ? ' — ' + str(review.reason) : '') }) : null);
    }));
  }

  // renderRoundTurn renders one round.turn row body; step is the turn as
  // applied (RoundsState.apply).
  function renderRoundTurn(p, ctx, step) {
    const box = h('div', { class: 'custom round-turn', data: { turn: str(p.type), state: step ? (step.ignored ? 'ignored' : step.to) : '' } });
    box.append(h('div', { class: 'round-turn-head' }, h('strong', { text: str(p.type) }),
      step && !step.ignored ? [' → round ', h('span', { class: 'pill pill-round-' + step.to, text: step.to })] : null,
      p.ref ? [' · round ', ctx.hashLink(p.ref)] : null));
    if (p.goal) box.append(h('div', { class: 'round-goal', text: 'Goal: ' + str(p.goal) }));
    box.append(h('div', { class: 'plain', text: str(p.text) }));
    if (p.choice) box.append(h('div', {}, 'choice ', h('code', { text: str(p.choice) })));
    box.append(optionList(list(p.options), null, ctx) || '');
    if (Number.isInteger(p.due)) box.append(h('div', { class: 'muted small', text: 'due ' + fmtTime(p.due * 1000) + (p.on_timeout ? ' · on_timeout ' + str(p.on_timeout) : '') }));
    if (p.brief) box.append(h('details', { class: 'payload' }, h('summary', { text: 'Brief' }), h('div', { class: 'plain', text: str(p.brief) })));
    if (step && step.ignored) box.append(h('div', { class: 'bad small turn-ignored', text: 'ignored: ' + step.reason }));
    return box;
  }

  // renderReceipt renders the deal.receipt row body of record seq and
  // checks it against the room's rounds (ctx.model.rounds, folded in seq
  // order: a round agreed later does not make it count).
  function renderReceipt(p, ctx, seq) {
    const status = h('div', { class: 'receipt-status', data: { state: 'pending' }, text: 'checking signatures…' });
    const box = h('div', { class: 'custom receipt' }, h('div', { class: 'q-label', text: 'Deal receipt' }),
      h('div', {}, 'between ', ctx.agent(p.partyA), ' and ', ctx.agent(p.partyB)),
      h('div', { class: 'small' }, 'terms hash ', h('code', { text: str(p.termsHash) }), ' · round ', ctx.hashLink(p.ref),
        Number.isInteger(p.ts) ? ' · ' + fmtTime(p.ts * 1000) : ''), status);
    checkReceipt(ctx.src.id, ctx.model.rounds, seq, p).then((v) => showVerdict(status, v));
    return box;
  }

  // roundsCard is the side card listing the room's rounds; refresh redraws
  // it (after round.turn records, and as time passes deadlines).
  function roundsCard(rp) {
    const el = h('section', { class: 'card rounds-card' });
    el.refresh = () => {
      const rs = rp.model.rounds ? rp.model.rounds.rounds : [];
      el.hidden = !rs.length;
      const now = Math.floor(Date.now() / 1000);
      el.replaceChildren(h('h3', {}, 'Rounds ', h('span', { class: 'count', text: String(rs.length) })),
        h('ul', { class: 'rounds' }, rs.map((r) => {
          const notice = roundNotice(r, now);
          const ignored = r.steps.filter((s) => s.ignored);
          return h('li', { class: 'round', data: { round: r.id, state: r.state } },
            h('div', {}, h('span', { class: 'pill pill-round-' + r.state, text: r.state }), ' ', h('strong', { text: r.goal }), ' ', rp.ctx.seqLink(r.seq)),
            optionList(r.options, r, rp.ctx),
            r.delivered.length ? [h('div', { class: 'muted small', text: 'delivered:' }), optionList(r.delivered, null, rp.ctx)] : null,
            r.due ? h('div', { class: 'muted small', text: 'due ' + fmtTime(r.due * 1000) + ' · on_timeout ' + r.onTimeout }) : null,
            notice ? h('div', { class: 'bad small round-notice', text: notice }) : null,
            ignored.length ? h('div', { class: 'muted small' }, `${ignored.length} ignored turn${ignored.length === 1 ? '' : 's'}: `,
              ignored.map((s) => [rp.ctx.seqLink(s.seq), ' ', s.reason, '; '])) : null);
        })));
    };
    el.refresh();
    return el;
  }

  // ---------------------------------------------------------------- sealed

  // A member-only room's turns and receipts are sealed (decision 23): this
  // viewer never decrypts and holds no key. A member may load the opened
  // export `adpnode seal open` wrote; it stays in this page. Each entry is
  // tied to a verified record (same seq, record hash, event hash and
  // sender; the record a sealed message.create), receipts are checked again
  // here, and the opened turns are folded into rounds by RoundsState. The
  // plaintext itself is the member's word: without the key nothing here can
  // tie it to the ciphertext.
  const EXPORT_TYPE = 'adpnode.sealed-open/1';
  const SEALED_CT = 'application/vnd.adpnode.sealed+json';
  const MAX_EXPORT = 16 << 20; // bytes of an export this page reads

  // matchEntry returns '' when entry e is a verified sealed record, else why not.
  function matchEntry(rp, e) {
    if (!e || typeof e !== 'object' || !Number.isInteger(e.seq)) return 'not an entry';
    const hash = rp.verifier.hashes.get(e.seq);
    if (!hash) return 'no verified record #' + e.seq;
    if (hash !== e.hash) return 'its hash is not the verified record #' + e.seq + '\'s';
    const rec = rp.model.bySeq.get(e.seq);
    const ev = rec && rec.envelope && rec.envelope.event;
    if (!ev || ev.type !== 'message.create' || !ev.payload || ev.payload.content_type !== SEALED_CT) return 'record #' + e.seq + ' is not a sealed message';
    if (ev.actor !== e.actor) return 'record #' + e.seq + ' has another sender';
    if (rp.model.seqOf(e.event_hash) !== e.seq) return 'its event hash is not record #' + e.seq + '\'s';
    return '';
  }

  function sealedCard(rp) {
    const input = h('input', { type: 'file', class: 'sealed-file' });
    input.accept = '.json,application/json';
    const out = h('div', { class: 'sealed-out', data: { state: 'empty' } });
    const el = h('section', { class: 'card sealed-card' }, h('h3', { text: 'Sealed events' }),
      h('p', { class: 'muted small', text: 'This room is member-only: its messages, turns and receipts are sealed and this viewer never decrypts them. ' +
        'A member can load the opened export (adpnode seal open ROOM -o opened.json); it stays in this page. Each entry is matched to a verified record by seq and hash, ' +
        'and receipt signatures are checked here; the opened text itself is the member\'s word.' }),
      input, out);
    input.addEventListener('change', async () => {
      const f = input.files && input.files[0];
      if (f) el.load(f.size > MAX_EXPORT ? '' : await f.text());
    });
    // load shows an export (its JSON text); it resolves when every receipt is checked.
    el.load = async (text) => {
      let x = null;
      try {
        x = JSON.parse(text);
      } catch (e) { /* shown below */ }
      if (!x || typeof x !== 'object' || x.type !== EXPORT_TYPE || !Array.isArray(x.entries)) {
        out.dataset.state = 'bad';
        out.replaceChildren(h('div', { class: 'bad small', text: 'Not an opened export (' + EXPORT_TYPE + ').' }));
        return;
      }
      if (x.room_id !== rp.src.id) {
        out.dataset.state = 'bad';
        out.replaceChildren(h('div', { class: 'bad small', text: 'This export is of another room.' }));
        return;
      }
      const entries = x.entries.filter((e) => e && typeof e === 'object').sort((a, b) => a.seq - b.seq);
      const rounds = new RoundsState();
      const receipts = [];
      const rows = entries.map((e) => {
        const why = matchEntry(rp, e);
        const p = e.payload && typeof e.payload === 'object' && !Array.isArray(e.payload) ? e.payload : null;
        const flag = str(e.flag);
        const state = why ? 'unmatched' : flag ? 'flagged' : 'matched';
        const li = h('li', { class: 'sealed-entry', data: { seq: String(e.seq), state, type: str(e.event_type) } },
          Number.isInteger(e.seq) ? rp.ctx.seqLink(e.seq) : '?', ' ',
          h('strong', { text: e.event_type ? str(e.event_type) : 'message' }), ' ',
          why ? h('span', { class: 'bad small sealed-why', text: '✗ ' + why }) : h('span', { class: 'ok small', text: '✓ matches the verified record' }),
          flag ? h('div', { class: 'bad small', text: 'flagged by the member: ' + flag }) : null);
        if (!why && !flag && e.event_type === 'round.turn' && p) {
          const step = rounds.apply({ seq: e.seq, hash: str(e.event_hash), actor: str(e.actor), payload: p });
          li.append(h('div', { class: 'plain small', text: str(p.type) + (step.ignored ? ' (ignored: ' + step.reason + ')' : ' → ' + step.to) + ' — ' + str(p.text) }));
        } else if (e.event_type === 'deal.receipt' && p) {
          const status = h('span', { class: 'receipt-status', data: { state: 'pending' }, text: 'checking signatures…' });
          li.append(h('div', { class: 'small' }, 'receipt between ', rp.ctx.agent(p.partyA), ' and ', rp.ctx.agent(p.partyB), ' · ', status));
          // Checked once every opened turn is folded (below): agreedSeq
          // keeps a round agreed after the receipt from making it count.
          receipts.push({ status, seq: e.seq, p, unverified: why || flag });
        } else if (!e.event_type) {
          li.append(h('div', { class: 'plain small', text: typeof e.content === 'string' ? e.content : JSON.stringify(e.content === undefined ? null : e.content) }));
        }
        return li;
      });
      const unopened = Array.isArray(x.unopened) ? x.unopened.length : 0;
      out.replaceChildren(
        h('div', { class: 'small', text: `${entries.length} opened by ${str(x.member)}` + (unopened ? `, ${unopened} not opened` : '') }),
        rounds.rounds.length ? h('ul', { class: 'rounds sealed-rounds' }, rounds.rounds.map((r) => h('li', { class: 'round', data: { round: r.id, state: r.state } },
          h('span', { class: 'pill pill-round-' + r.state, text: r.state }), ' ', h('strong', { text: r.goal }), ' ', rp.ctx.seqLink(r.seq)))) : null,
        h('ul', { class: 'sealed-entries' }, rows));
      await Promise.all(receipts.map(async (rc) => {
        const v = await checkReceipt(rp.src.id, rounds, rc.seq, rc.p);
        showVerdict(rc.status, rc.unverified && v.state !== 'bad' ? { state: 'bad', text: '✗ not a verified record' } : v);
      }));
      out.dataset.state = 'loaded';
    };
    return el;
  }

  Object.assign(V, { RoundsState, roundNotice, verifyReceipt, receiptCounts, checkReceipt, renderRoundTurn, renderReceipt, roundsCard, sealedCard });
})(window.ADPViewer = window.ADPViewer || {});
