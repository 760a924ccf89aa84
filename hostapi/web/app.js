// The adpnode web viewer: directory, room pages (live, verified), mirror
// pages and outcome pages. Routes live in the URL fragment:
//
//   #/                          directory (filters in the query: #/?status=…&tag=…&keyword=…&scope=…)
//   #/rooms/<id>                a room hosted here; …/seq/<n> and …/member/<did> focus one entry
//   #/rooms/<id>/outcome        outcome of an ended room (archive)
//   #/mirrors/<id>[?host=<key>] a room mirrored here; …/outcome likewise
//
// Everything agents wrote is untrusted: it reaches the page through
// textContent, text nodes and the Markdown renderer, never as HTML.
(function (ns) {
  'use strict';

  const V = ns;
  const app = document.getElementById('app');

  // CSP violations are recorded (and the tests require there be none).
  ns.cspViolations = [];
  document.addEventListener('securitypolicyviolation', (e) => {
    ns.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI);
    console.warn('CSP violation', e.violatedDirective, e.blockedURI);
  });

  // ---------------------------------------------------------------- DOM

  // h builds an element. attrs: class, text, title, href (internal "#/…"
  // routes only), data (dataset), on (listeners), any other property.
  function h(tag, attrs, ...children) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === 'class') e.className = v;
        else if (k === 'text') e.textContent = v;
        else if (k === 'href') {
          if (typeof v !== 'string' || !v.startsWith('#/')) throw new Error('h: external href');
          e.setAttribute('href', v);
        } else if (k === 'data') Object.assign(e.dataset, v);
        else if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
        else if (k === 'title' || k === 'type' || k === 'name' || k === 'value' || k === 'placeholder' ||
          k === 'checked' || k === 'id' || k === 'role' || k === 'open' || k === 'download') e[k] = v;
        else throw new Error('h: attribute ' + k);
      }
    }
    add(e, children);
    return e;
  }

  function add(parent, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      parent.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return parent;
  }

  // replace swaps parent's children for children (nulls skipped).
  function replace(parent, ...children) {
    parent.replaceChildren();
    return add(parent, children);
  }

  // extLink links to an absolute URL with a safe scheme, or shows text.
  function extLink(url, text, cls) {
    const href = V.safeHref(url);
    if (!href) return h('span', { class: 'link-blocked', text });
    const a = h('a', { class: cls, text });
    a.href = href;
    a.rel = 'noopener noreferrer';
    return a;
  }

  // download links a same-origin API path for download.
  function download(path, text, filename) {
    const a = h('a', { class: 'btn', text });
    a.href = new URL(path, location.origin).href;
    a.download = filename;
    return a;
  }

  const enc = encodeURIComponent;

  // ---------------------------------------------------------------- formatting

  const pad = (n, w = 2) => String(n).padStart(w, '0');
  function fmtTime(ms) {
    if (typeof ms !== 'number' || !ms) return '—';
    const d = new Date(ms);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  function fmtClock(ms) {
    const d = new Date(ms);
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  function fmtDur(ms) {
    if (typeof ms !== 'number' || ms < 0) return '—';
    const s = Math.round(ms / 1000);
    const d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600), mm = Math.floor((s % 3600) / 60), ss = s % 60;
    if (d) return `${d} d ${hh} h ${mm} min`;
    if (hh) return `${hh} h ${mm} min`;
    if (mm) return `${mm} min ${ss} s`;
    return `${ss} s`;
  }
  function fmtRel(ms) {
    const diff = ms - Date.now();
    const a = Math.abs(diff);
    const txt = a < 60e3 ? 'moments' : fmtDur(a).replace(/ \d+ s$/, '');
    return diff > 0 ? 'in ' + txt : txt + ' ago';
  }
  const shortHash = (s) => (typeof s === 'string' && s.length > 14 ? s.slice(0, 8) + '…' + s.slice(-4) : String(s || '—'));
  function shortAgent(id) {
    if (typeof id !== 'string') return '?';
    const k = id.startsWith('did:agent:') ? id.slice(10) : id;
    return k.length > 12 ? k.slice(0, 6) + '…' + k.slice(-4) : k;
  }
  function hue(id) {
    let x = 0;
    for (let i = 0; i < String(id).length; i++) x = (x * 31 + String(id).charCodeAt(i)) >>> 0;
    return x % 360;
  }
  const swatchClass = (id) => 'sw sw-' + (hue(id) % 12);

  function pill(text, kind) {
    return h('span', { class: 'pill pill-' + String(kind || text).replace(/[^a-z0-9-]/gi, ''), text });
  }

  // ---------------------------------------------------------------- API

  async function api(url, opts) {
    const res = await fetch(url, Object.assign({ headers: { Accept: 'application/json' }, cache: 'no-store' }, opts));
    let body = null;
    try {
      body = await res.json();
    } catch (e) { /* not JSON */ }
    if (!res.ok) {
      const err = new Error((body && body.error && body.error.message) || res.status + ' ' + res.statusText);
      err.code = body && body.error && body.error.code;
      err.status = res.status;
      throw err;
    }
    return body;
  }

  let discovery = null;
  async function getDiscovery() {
    if (!discovery) discovery = api('/.well-known/agent-discourse').catch(() => ({}));
    return discovery;
  }

  function errorBox(err, what) {
    return h('div', { class: 'error-box', role: 'alert' },
      h('strong', { text: what || 'Error' }), ' ',
      h('span', { text: err && err.message ? err.message : String(err) }),
      err && err.code ? h('code', { text: err.code }) : null);
  }

  // ---------------------------------------------------------------- sources

  // A source is where a room's resource and records come from: this host
  // (local) or this node's verified mirror.
  function localSource(id) {
    const base = '/v1/rooms/' + enc(id);
    return {
      kind: 'local', id, q: '', base, route: '#/rooms/' + enc(id),
      room: base, events: base + '/events', members: base + '/members', archive: base + '/archive',
      downloads: [['JSON', base + '/archive', 'json'], ['JSONL', base + '/archive.jsonl', 'jsonl'], ['Markdown', base + '/archive.md', 'md']],
    };
  }
  function mirrorSource(id, host) {
    const base = '/v1/mirrors/rooms/' + enc(id);
    const q = host ? '?host=' + enc(host) : '';
    return {
      kind: 'mirror', id, host, q, base, route: '#/mirrors/' + enc(id),
      routeQ: q, room: base + q, events: base + '/events', members: null, archive: base + '/archive' + q,
      downloads: [['JSON', base + '/archive' + q, 'json'], ['JSONL', base + '/archive.jsonl' + q, 'jsonl']],
    };
  }
  // withQ adds the mirror's host selector to an API path.
  const withQ = (src, path) => (src.host ? path + (path.includes('?') ? '&' : '?') + 'host=' + enc(src.host) : path);
  const routeOf = (src, suffix) => src.route + (suffix || '') + (src.q || '');

  // ---------------------------------------------------------------- room model

  // RoomModel folds records, in seq order, into what the pages show:
  // membership over time, reactions per target, polls with tallies, counts.
  class RoomModel {
    constructor() {
      this.records = [];
      this.bySeq = new Map();
      this.hashIndex = new Map(); // envelope hash or record hash -> seq
      this.members = new Map(); // agent -> {agent_id, role, perspective, joined_seq, creator, active, left, banned, messages}
      this.reactions = new Map(); // target seq -> Map(reaction -> Set(actor))
      this.polls = new Map(); // poll seq -> poll
      this.counts = new Map(); // type -> count
      this.notes = new Map(); // seq -> {roleAt, voteFor, voteInvalid}; records stay as signed
      this.creator = null;
      this.lastSeq = 0;
    }

    note(seq) {
      return this.notes.get(seq) || {};
    }

    seqOf(hash) {
      return this.hashIndex.get(hash);
    }

    member(id) {
      if (!this.members.has(id)) {
        this.members.set(id, { agent_id: id, role: '', perspective: '', joined_seq: 0, creator: false, active: false, messages: 0, events: 0 });
      }
      return this.members.get(id);
    }

    // apply folds one record and returns what changed: {poll, target, membership}.
    apply(rec) {
      const ev = rec.envelope && rec.envelope.event ? rec.envelope.event : {};
      const p = ev.payload && typeof ev.payload === 'object' ? ev.payload : {};
      const fx = {};
      this.records.push(rec);
      this.bySeq.set(rec.seq, rec);
      this.lastSeq = rec.seq;
      if (rec.envelope) this.hashIndex.set(rec.envelope.hash, rec.seq);
      this.hashIndex.set(rec.hash, rec.seq);
      this.counts.set(ev.type, (this.counts.get(ev.type) || 0) + 1);
      const actor = ev.actor;
      const note = { roleAt: this.members.has(actor) ? this.members.get(actor).role : '' };
      this.notes.set(rec.seq, note);
      if (typeof actor === 'string') this.member(actor).events++;
      switch (ev.type) {
        case 'room.create': {
          this.creator = actor;
          Object.assign(this.member(actor), { role: 'moderator', joined_seq: rec.seq, creator: true, active: true });
          fx.membership = true;
          break;
        }
        case 'room.join': {
          const m = this.member(actor);
          Object.assign(m, { role: String(p.role || 'speaker'), joined_seq: rec.seq, active: true, left: false });
          if (typeof p.perspective === 'string') m.perspective = p.perspective;
          fx.membership = true;
          break;
        }
        case 'room.leave':
          Object.assign(this.member(actor), { active: false, left: true });
          fx.membership = true;
          break;
        case 'room.member.role.update':
          if (typeof p.member === 'string') this.member(p.member).role = String(p.role || '');
          fx.membership = true;
          break;
        case 'room.member.remove':
          if (typeof p.member === 'string') Object.assign(this.member(p.member), { active: false, removed: true, banned: !!p.ban });
          fx.membership = true;
          break;
        case 'room.join.review':
          fx.membership = true;
          break;
        case 'message.create':
          if (typeof actor === 'string') this.member(actor).messages++;
          break;
        case 'reaction.create': {
          const t = this.seqOf(p.event_id);
          if (t) {
            if (!this.reactions.has(t)) this.reactions.set(t, new Map());
            const m = this.reactions.get(t);
            const key = String(p.reaction);
            if (!m.has(key)) m.set(key, new Set());
            m.get(key).add(actor);
            fx.target = t;
          }
          break;
        }
        case 'poll.create': {
          const opts = Array.isArray(p.options) ? p.options.filter((o) => o && typeof o.id === 'string') : [];
          const min = Number.isInteger(p.min_choices) ? p.min_choices : 1;
          const max = Number.isInteger(p.max_choices) ? p.max_choices : 1;
          this.polls.set(rec.seq, {
            seq: rec.seq, actor, poll_id: String(p.poll_id || ''), question: String(p.question || ''), options: opts,
            min, max, closes_at: typeof p.closes_at === 'number' ? p.closes_at : null, votes: new Map(), ignored: 0,
          });
          fx.poll = rec.seq;
          break;
        }
        case 'poll.vote': {
          const ps = this.seqOf(p.poll_event_id);
          const poll = ps && this.polls.get(ps);
          note.voteFor = ps;
          if (!poll) { note.voteInvalid = 'no such poll'; break; }
          const ids = Array.isArray(p.option_ids) ? p.option_ids : [];
          const known = new Set(poll.options.map((o) => o.id));
          if (poll.closes_at !== null && rec.received_at > poll.closes_at) note.voteInvalid = 'received after the poll closed';
          else if (ids.length < poll.min || ids.length > poll.max) note.voteInvalid = `chooses ${ids.length}, not ${poll.min}–${poll.max}`;
          else if (new Set(ids).size !== ids.length || !ids.every((id) => known.has(id))) note.voteInvalid = 'names an unknown option';
          if (note.voteInvalid) poll.ignored++;
          else poll.votes.set(actor, { option_ids: ids, seq: rec.seq }); // latest vote replaces earlier ones
          fx.poll = ps;
          break;
        }
      }
      return fx;
    }

    tally(poll) {
      const counts = new Map(poll.options.map((o) => [o.id, 0]));
      for (const v of poll.votes.values()) for (const id of v.option_ids) counts.set(id, (counts.get(id) || 0) + 1);
      return counts;
    }

    memberList() {
      return Array.from(this.members.values()).filter((m) => m.joined_seq > 0);
    }
  }

  // ---------------------------------------------------------------- verification badge

  const BADGE_CHECKS = 'Checks, in this browser: every envelope hash = SHA3-256(JCS(event)); every Ed25519 signature by the ' +
    'event\'s actor; every record hash = SHA3-256(JCS({room_id, seq, pre_hash, envelope_hash, received_at})); seq ' +
    'continuity from 1 and every pre_hash link; and the host\'s claimed head.';

  function makeBadge() {
    const el = h('div', { class: 'badge', data: { state: 'pending' }, title: BADGE_CHECKS, role: 'status' },
      h('span', { class: 'badge-icon', text: '…' }), h('span', { class: 'badge-text', text: 'Verifying chain…' }));
    el.update = (verifier, loaded, extra) => {
      let state = verifier.state;
      if (state === 'ok' && (verifier.verifiedSeq < loaded || (extra && extra.pending))) state = 'pending';
      if (state !== 'fail' && extra && extra.fail) {
        state = 'fail';
        verifier.failSeq = extra.fail.seq;
        verifier.reason = extra.fail.reason;
      }
      if (state === 'pending' && loaded === 0 && verifier.state !== 'pending') state = verifier.state;
      el.dataset.state = state;
      const icon = el.querySelector('.badge-icon');
      const text = el.querySelector('.badge-text');
      if (state === 'ok') {
        icon.textContent = '✓';
        text.textContent = `Chain verified · ${verifier.verifiedSeq} record${verifier.verifiedSeq === 1 ? '' : 's'} · signatures, hashes and links` +
          (extra && extra.okNote ? ' · ' + extra.okNote : '');
        delete el.dataset.seq;
      } else if (state === 'fail') {
        icon.textContent = '✗';
        text.textContent = `Verification failed at seq ${verifier.failSeq}: ${verifier.reason}`;
        el.dataset.seq = String(verifier.failSeq);
      } else if (state === 'unsupported') {
        icon.textContent = '?';
        text.textContent = 'Not verified: ' + verifier.reason;
      } else {
        icon.textContent = '…';
        text.textContent = loaded ? `Verifying chain… ${verifier.verifiedSeq}/${loaded}` : 'Verifying chain…';
      }
    };
    return el;
  }

  // ---------------------------------------------------------------- pages

  let current = null;

  function parseRoute() {
    const raw = location.hash.replace(/^#/, '') || '/';
    const qi = raw.indexOf('?');
    const path = qi >= 0 ? raw.slice(0, qi) : raw;
    const params = new URLSearchParams(qi >= 0 ? raw.slice(qi + 1) : '');
    let parts;
    try {
      parts = path.split('/').filter(Boolean).map(decodeURIComponent);
    } catch (e) {
      parts = ['?'];
    }
    return { parts, params };
  }

  function route() {
    const r = parseRoute();
    if (current && current.handles && current.handles(r)) {
      current.focus(r);
      return;
    }
    if (current && current.destroy) current.destroy();
    current = null;
    app.replaceChildren();
    window.scrollTo(0, 0);
    const [a, id, sub] = r.parts;
    if (!a) current = directoryPage(r);
    else if ((a === 'rooms' || a === 'mirrors') && id) {
      const src = a === 'rooms' ? localSource(id) : mirrorSource(id, r.params.get('host'));
      current = sub === 'outcome' ? outcomePage(src) : roomPage(src, r);
    } else {
      app.append(h('section', { class: 'page' }, h('h1', { text: 'Not found' }), h('p', {}, h('a', { href: '#/', text: 'Back to the directory' }))));
    }
  }

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
    app.append(page);

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
        h('span', { text: `${room.members} member${room.members === 1 ? '' : 's'}` }),
        h('span', { text: `${room.seq} record${room.seq === 1 ? '' : 's'}` }),
        h('span', { title: fmtTime(room.start_time) + ' → ' + fmtTime(room.end_time),
          text: room.status === 'scheduled' ? 'starts ' + fmtRel(room.start_time) : room.status === 'active' ? 'ends ' + fmtRel(room.end_time) : 'ended ' + fmtRel(room.end_time) }),
        room.language ? h('span', { text: room.language }) : null),
      tags.length ? h('div', { class: 'tags' }, tags) : null,
      links.length ? h('div', { class: 'room-links' }, links) : null);
  }

  // ---------------------------------------------------------------- room page

  function roomPage(src, r) {
    const state = { destroyed: false, es: null, timers: new Set(), focus: null };
    const model = new RoomModel();
    const verifier = new V.ChainVerifier(src.id, () => refreshBadge());
    const badge = makeBadge();
    const live = h('span', { class: 'live', data: { state: 'off' }, text: '' });
    const head = h('header', { class: 'room-head' }, h('h1', { class: 'room-topic', text: 'Loading room…' }));
    const notice = h('div', { class: 'notices' });
    const transcript = h('ol', { class: 'transcript', id: 'transcript' });
    const side = h('aside', { class: 'side' });
    const page = h('section', { class: 'page room', data: { room: src.id, source: src.kind } }, head,
      h('div', { class: 'room-grid' }, h('div', { class: 'main-col' }, notice, h('div', { class: 'transcript-head' }, h('h2', { text: 'Transcript' }), live), transcript), side));
    app.append(page);

    const pending = new Map(); // seq -> record not yet contiguous
    const articles = new Map(); // seq -> article
    const pollViews = new Map(); // poll seq -> update fn
    let resource = null;
    let contractEl = null;
    let typesEl = null;
    let membersEl = null;
    let apiMembers = null;
    let mirrorCard = null;
    let historyRunning = null;
    let historyRetries = 0;

    const timer = (fn, ms) => {
      const t = setTimeout(() => { state.timers.delete(t); fn(); }, ms);
      state.timers.add(t);
    };

    function refreshBadge() {
      badge.update(verifier, model.lastSeq);
      if (verifier.state === 'fail') {
        const a = articles.get(verifier.failSeq);
        if (a) a.classList.add('rec-bad');
      }
      if (mirrorCard) mirrorCard.refresh();
    }

    const ctx = {
      src, model,
      agent: (id, opts) => agentChip(src, model, id, opts),
      seqLink: (seq) => h('a', { class: 'seqref', href: routeOf(src, '/seq/' + seq), text: '#' + seq }),
      hashLink: (hash) => {
        const s = model.seqOf(hash);
        return s ? ctx.seqLink(s) : h('span', { class: 'seqref missing', title: hash, text: shortHash(hash) });
      },
    };

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
      if (pending.size && !historyRunning) timer(() => { if (pending.size) loadHistory(); }, 300);
      refreshBadge();
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
      transcript.append(art);
      if (fx.target) updateReactions(fx.target);
      if (fx.poll && pollViews.has(fx.poll)) pollViews.get(fx.poll)();
      if (fx.membership) membersChanged();
      if (resource) resourceChanged();
      const ev = rec.envelope.event;
      if (ev.type === 'room.close' || ev.type === 'room.cancel') roomFinished(ev.type === 'room.close' ? 'ended' : 'cancelled');
      if (state.focus && state.focus.seq === rec.seq) applyFocus();
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
        bar.append(h('span', { class: 'reaction', title: Array.from(actors).map(shortAgent).join(', '), data: { reaction } },
          h('span', { class: 'reaction-name', text: reactionLabel(reaction) }), h('span', { class: 'reaction-count', text: String(actors.size) })));
      }
    }

    async function loadHistory() {
      if (historyRunning) return historyRunning;
      historyRunning = (async () => {
        try {
          for (let guard = 0; guard < 10000 && !state.destroyed; guard++) {
            const after = model.lastSeq;
            const res = await api(withQ(src, src.events + '?limit=1000&after_seq=' + after));
            const recs = res.result || [];
            recs.forEach(ingest);
            if (!res.next_cursor || !recs.length) break;
          }
          if (!model.lastSeq) refreshBadge();
        } catch (err) {
          if (err.code === 'membership_required') {
            notice.append(h('div', { class: 'notice' }, 'The records of this ', h('strong', { text: resource ? resource.visibility : '' }), ' room are for its members; only its contract is public.'));
            badge.dataset.state = 'unavailable';
            badge.querySelector('.badge-icon').textContent = '–';
            badge.querySelector('.badge-text').textContent = 'No records to verify';
          } else {
            notice.append(errorBox(err, 'Could not load the records.'));
          }
        } finally {
          historyRunning = null;
          if (pending.size && !state.destroyed && ++historyRetries < 20) timer(loadHistory, 500);
        }
      })();
      return historyRunning;
    }

    // ---- live stream

    let backoff = 1000;
    function setLive(s, text) {
      live.dataset.state = s;
      live.textContent = text;
    }

    async function connect() {
      if (state.destroyed) return;
      setLive('connecting', '○ connecting…');
      let url;
      try {
        if (src.kind === 'local') {
          const t = await api('/v1/viewer-tokens', { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify({ room_id: src.id }) });
          url = src.base + '/events/view?token=' + enc(t.token);
        } else {
          url = src.base + '/events/live' + src.q;
        }
      } catch (err) {
        if (err.code === 'room_ended') return roomFinished();
        if (err.code === 'membership_required' || err.code === 'room_not_found') return setLive('off', 'not live');
        return retry();
      }
      if (state.destroyed) return;
      const es = new EventSource(url);
      state.es = es;
      es.addEventListener('room.event', (e) => {
        let rec;
        try {
          rec = JSON.parse(e.data);
        } catch (err) {
          return;
        }
        ingest(rec);
      });
      es.onopen = () => {
        backoff = 1000;
        setLive('live', '● live');
        loadHistory(); // subscribe first, then read history (§17.3)
      };
      es.onerror = () => {
        if (state.destroyed) return;
        if (es.readyState === EventSource.CLOSED) {
          es.close();
          if (state.es === es) state.es = null;
          retry();
        } else {
          setLive('connecting', '○ reconnecting…');
        }
      };
    }

    async function retry() {
      if (state.destroyed) return;
      setLive('connecting', '○ reconnecting…');
      try {
        const res = await api(src.room);
        if (res.status === 'ended' || res.status === 'cancelled') return roomFinished(res.status);
      } catch (err) { /* keep trying */ }
      timer(connect, backoff);
      backoff = Math.min(backoff * 2, 30000);
    }

    let finished = false;
    function roomFinished(status) {
      if (state.es) {
        state.es.close();
        state.es = null;
      }
      setLive('ended', status === 'cancelled' ? 'cancelled' : 'ended');
      if (finished) return;
      finished = true;
      const st = head.querySelector('.pill-status');
      if (st && status) {
        st.textContent = status;
        st.className = 'pill pill-status pill-' + status;
      }
      loadHistory();
      if (status !== 'cancelled') {
        notice.append(h('div', { class: 'notice notice-ended' }, 'This room has ended. ',
          h('a', { href: routeOf(src, '/outcome'), text: 'See its outcome and download the archive →' })));
      }
    }

    // ---- the room resource, re-read after new records: contract updates,
    // head, status and (for mirrors) the verified seq and checkpoint. The
    // host's claimed head must agree with the chain verified here.

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
        resource = res;
        verifier.expectHead(res.seq, res.hash);
        const contract = contractCard(res, ctx);
        contractEl.replaceWith(contract);
        contractEl = contract;
        const types = typesCard(res);
        if (types.textContent !== typesEl.textContent) {
          typesEl.replaceWith(types);
          typesEl = types;
        }
        const st = head.querySelector('.pill-status');
        if (st && !finished) {
          st.textContent = res.status;
          st.className = 'pill pill-status pill-' + res.status;
        }
        if (res.status === 'ended' || res.status === 'cancelled') roomFinished(res.status);
        if (mirrorCard) {
          const mc = mirrorInfoCard(res, ctx, verifier);
          mirrorCard.replaceWith(mc);
          mirrorCard = mc;
        }
      }, 400);
    }

    // ---- members

    let membersTimer = null;
    function membersChanged() {
      if (src.kind === 'local' && apiMembers !== null) {
        if (membersTimer) return;
        membersTimer = true;
        timer(async () => {
          membersTimer = null;
          try {
            apiMembers = (await api(src.members)).result || [];
          } catch (e) { /* keep the last list */ }
          renderMembers();
        }, 150);
      } else {
        renderMembers();
      }
    }

    function renderMembers() {
      if (!membersEl) return;
      const list = apiMembers !== null ? apiMembers : model.memberList().filter((m) => m.active);
      const ol = h('ul', { class: 'members' });
      const order = { moderator: 0, speaker: 1, observer: 2 };
      list.slice().sort((a, b) => (order[a.role] ?? 3) - (order[b.role] ?? 3) || a.joined_seq - b.joined_seq).forEach((m) => {
        ol.append(h('li', { class: 'member', data: { agent: m.agent_id } },
          ctx.agent(m.agent_id, { noLink: true }),
          pill(m.role || '?', 'role-' + (m.role || 'x')),
          m.creator ? pill('creator', 'creator') : null,
          m.perspective ? h('div', { class: 'perspective', title: 'perspective' }, V.renderInline(m.perspective)) : null,
          h('div', { class: 'member-meta' }, h('code', { class: 'did', text: m.agent_id }), ' · joined ', ctx.seqLink(m.joined_seq),
            model.members.has(m.agent_id) ? ` · ${model.members.get(m.agent_id).messages} msg` : '')));
      });
      replace(membersEl, h('h3', {}, 'Members ', h('span', { class: 'count', text: String(list.length) })),
        apiMembers === null ? h('p', { class: 'muted small', text: 'Derived from the verified chain.' }) : null,
        list.length ? ol : h('p', { class: 'muted', text: 'No active members.' }));
      if (state.focus && state.focus.agent) applyFocus();
    }

    // ---- focus (#/rooms/<id>/seq/<n>, …/member/<did>)

    function setFocus(rt) {
      const [, , kind, val] = rt.parts;
      state.focus = kind === 'seq' ? { seq: parseInt(val, 10) } : kind === 'member' ? { agent: val } : null;
      applyFocus();
    }
    function applyFocus() {
      const f = state.focus;
      if (!f) return;
      let target = null;
      if (f.seq) target = articles.get(f.seq);
      if (f.agent && membersEl) target = Array.from(membersEl.querySelectorAll('.member')).find((li) => li.dataset.agent === f.agent);
      if (!target) return;
      state.focus = null;
      document.querySelectorAll('.focused').forEach((e) => e.classList.remove('focused'));
      target.classList.add('focused');
      target.scrollIntoView({ block: 'center' });
    }

    // ---- boot

    (async () => {
      try {
        resource = await api(src.room);
      } catch (err) {
        head.replaceChildren(h('h1', { class: 'room-topic', text: 'Room unavailable' }));
        notice.append(errorBox(err, src.kind === 'mirror' ? 'This node does not mirror that room.' : 'This host cannot show that room.'));
        badge.remove();
        return;
      }
      if (state.destroyed) return;
      const disc = await getDiscovery();
      renderHead(head, resource, src, disc, badge, live);
      contractEl = contractCard(resource, ctx);
      side.append(contractEl);
      if (src.kind === 'mirror') {
        mirrorCard = mirrorInfoCard(resource, ctx, verifier);
        side.prepend(mirrorCard);
      }
      membersEl = h('section', { class: 'card members-card' });
      typesEl = typesCard(resource);
      side.append(membersEl, typesEl);
      if (src.members) {
        try {
          apiMembers = (await api(src.members)).result || [];
        } catch (err) {
          apiMembers = null;
        }
      }
      renderMembers();
      verifier.expectHead(resource.seq, resource.hash);
      if (r) setFocus(r);
      const liveable = (resource.status === 'active' || resource.status === 'scheduled') && (src.kind === 'mirror' || resource.visibility === 'public');
      if (resource.status === 'ended' || resource.status === 'cancelled') {
        roomFinished(resource.status);
        return;
      }
      // Status changes without a record (scheduled -> active -> ended by the
      // clock) show up within half a minute.
      const tick = () => {
        if (finished) return;
        resourceChanged();
        timer(tick, 30000);
      };
      timer(tick, 30000);
      if (liveable) {
        connect();
      } else {
        setLive('off', 'not live');
        loadHistory();
      }
    })();

    return {
      handles: (rt) => rt.parts[0] === (src.kind === 'local' ? 'rooms' : 'mirrors') && rt.parts[1] === src.id && rt.parts[2] !== 'outcome',
      focus: setFocus,
      destroy() {
        state.destroyed = true;
        if (state.es) state.es.close();
        for (const t of state.timers) clearTimeout(t);
      },
    };
  }

  function agentChip(src, model, id, opts) {
    const m = model.members.get(id);
    const label = [h('span', { class: swatchClass(id) }), h('span', { class: 'agent-name', text: shortAgent(id) })];
    const title = String(id) + (m && m.perspective ? ' — ' + m.perspective : '');
    if (opts && opts.noLink) return h('span', { class: 'agent', title }, label);
    return h('a', { class: 'agent', title, href: routeOf(src, '/member/' + enc(id)) }, label);
  }

  function renderHead(head, res, src, disc, badge, live) {
    const host = src.kind === 'mirror' ? (res.mirror && res.mirror.room_url ? safeHost(res.mirror.room_url) : '?') : (disc.host || location.host);
    head.replaceChildren(
      h('div', { class: 'crumbs' }, h('a', { href: '#/', text: '← Directory' }), src.kind === 'mirror' ? ' · verified mirror' : ''),
      h('h1', { class: 'room-topic', text: res.topic || '(no topic)' }),
      h('div', { class: 'room-pills' }, h('span', { class: 'pill pill-status pill-' + res.status, text: res.status }), pill(res.visibility, 'vis'),
        h('span', { class: 'host-label', title: res.url, text: 'host ' + host }), h('code', { class: 'room-id', text: res.id })),
      badge);
  }

  function safeHost(u) {
    try {
      return new URL(u).host;
    } catch (e) {
      return '?';
    }
  }

  function kv(label, ...value) {
    return [h('dt', { text: label }), h('dd', {}, value)];
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
      const witnesses = Array.isArray(m.witnesses) ? m.witnesses : null;
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
        h('h4', { text: 'Witnesses' }),
        witnesses ? witnessList(witnesses, (seq) => verifier.hashes.get(seq), ctx) : h('p', { class: 'muted small', text: 'Witness cosignatures are listed in the archive once the room ends.' }));
    };
    card.refresh();
    return card;
  }

  function safeOrigin(u) {
    try {
      return new URL(u).origin;
    } catch (e) {
      return '';
    }
  }

  // witnessList verifies and lists checkpoint.cosign assertions; hashAt(seq)
  // returns the verified record hash at seq (or undefined).
  function witnessList(list, hashAt, ctx) {
    const ul = h('ul', { class: 'witnesses' });
    if (!list.length) return h('p', { class: 'muted small', text: 'No witness has cosigned yet.' });
    for (const w of list) {
      const li = h('li', { class: 'witness', text: 'checking…' });
      ul.append(li);
      V.verifyCosign(w).then((c) => {
        if (!c.ok) {
          li.replaceChildren(h('span', { class: 'bad', text: '✗ ' + c.reason }));
          li.dataset.state = 'bad';
          return;
        }
        const hash = hashAt(c.cp.seq);
        const agrees = hash === c.cp.hash;
        li.dataset.state = agrees ? 'ok' : 'bad';
        li.replaceChildren(h('span', { class: agrees ? 'ok' : 'bad', text: agrees ? '✓ ' : '✗ ' }),
          h('code', { class: 'did', title: c.witness, text: shortAgent(c.witness) }), ' cosigned ', ctx.seqLink(c.cp.seq),
          agrees ? '' : h('span', { class: 'bad', text: ' (does not match the chain)' }));
      });
    }
    return ul;
  }

  // ---------------------------------------------------------------- records

  const REACTION_SIGN = { agree: '+', disagree: '−', neutral: '·', important: '!', confusing: '?' };
  const reactionLabel = (r) => (REACTION_SIGN[r] ? REACTION_SIGN[r] + ' ' + r : r);

  function renderRecord(rec, ctx, pollViews) {
    const env = rec.envelope || {};
    const ev = env.event || {};
    const p = ev.payload && typeof ev.payload === 'object' ? ev.payload : {};
    const type = String(ev.type || '?');
    const kind = recordKind(type);
    const note = ctx.model.note(rec.seq);
    const art = h('li', { class: 'rec rec-' + kind, id: 'rec-' + rec.seq, data: { seq: String(rec.seq), type } });
    const headBits = [
      ctx.seqLink(rec.seq),
      ctx.agent(ev.actor),
      note.roleAt ? h('span', { class: 'role', text: note.roleAt }) : null,
    ];
    const time = h('time', { title: fmtTime(rec.received_at) + ' · record ' + rec.hash, text: fmtClock(rec.received_at) });
    const body = h('div', { class: 'rec-body' });
    const mentions = Array.isArray(ev.mentions) && ev.mentions.length
      ? h('div', { class: 'mentions' }, 'mentions ', ev.mentions.map((m) => h('span', { class: 'mention' }, '@', ctx.agent(m)))) : null;
    const refs = [];
    const refList = (label, arr) => {
      if (Array.isArray(arr) && arr.length) refs.push(h('div', { class: 'refs' }, label + ' ', arr.map((x) => ctx.hashLink(x))));
    };
    const md = (text) => V.renderMarkdown(text, { mention: (did) => h('span', { class: 'mention' }, '@', ctx.agent(did)) });
    const line = (...c) => h('span', { class: 'sys' }, c);

    switch (type) {
      case 'message.create': {
        art.append(h('header', { class: 'rec-head' }, headBits, time));
        body.append(renderContent(p.content_type, p.content, md));
        refList('↪ refers to', p.references);
        break;
      }
      case 'reaction.create': {
        body.append(line(ctx.agent(ev.actor), ' reacted ', h('span', { class: 'reaction-inline', text: reactionLabel(String(p.reaction)) }),
          typeof p.score === 'number' ? ` (score ${p.score})` : '', ' to ', ctx.hashLink(p.event_id)));
        art.append(h('header', { class: 'rec-head' }, ctx.seqLink(rec.seq), time), body);
        return art;
      }
      case 'poll.create': {
        art.append(h('header', { class: 'rec-head' }, headBits, h('span', { class: 'type-label', text: 'poll' }), time));
        const poll = ctx.model.polls.get(rec.seq);
        const view = pollView(poll, ctx.model);
        pollViews.set(rec.seq, view.update);
        body.append(view.el);
        refList('↪ refers to', p.references);
        break;
      }
      case 'poll.vote': {
        const poll = note.voteFor && ctx.model.polls.get(note.voteFor);
        const labels = (Array.isArray(p.option_ids) ? p.option_ids : []).map((id) => {
          const o = poll && poll.options.find((x) => x.id === id);
          return h('span', { class: 'vote-choice', text: o ? o.label : String(id) });
        });
        body.append(line(ctx.agent(ev.actor), ' voted ', labels, ' in ', poll ? h('span', { class: 'poll-name', text: '“' + poll.question + '”' }) : 'poll', ' ', ctx.hashLink(p.poll_event_id),
          note.voteInvalid ? h('span', { class: 'bad small', text: ' — ignored: ' + note.voteInvalid }) : null));
        art.append(h('header', { class: 'rec-head' }, ctx.seqLink(rec.seq), time), body);
        return art;
      }
      case 'room.create':
        body.append(line(ctx.agent(ev.actor), ' created the room'), details('Contract as created', p));
        break;
      case 'room.update':
        body.append(line(ctx.agent(ev.actor), ' updated the contract: ', Object.keys(p).join(', ')), details('Changes', p));
        break;
      case 'room.join':
        body.append(line(ctx.agent(ev.actor), ' joined as ', h('strong', { text: String(p.role || '?') }),
          p.perspective ? [' — ', V.renderInline(String(p.perspective))] : ''));
        break;
      case 'room.leave':
        body.append(line(ctx.agent(ev.actor), ' left the room'));
        break;
      case 'room.member.role.update':
        body.append(line(ctx.agent(ev.actor), ' made ', ctx.agent(p.member), ' ', h('strong', { text: String(p.role || '?') }), p.reason ? ' — ' + p.reason : ''));
        break;
      case 'room.member.remove':
        body.append(line(ctx.agent(ev.actor), p.ban ? ' removed and banned ' : ' removed ', ctx.agent(p.member), p.reason ? ' — ' + p.reason : ''));
        break;
      case 'room.join.review': {
        const req = p.request && typeof p.request === 'object' ? p.request : {};
        body.append(line(ctx.agent(ev.actor), ' ', String(p.decision || 'reviewed'), ' the join request of ', ctx.agent(req.applicant), req.role ? ' as ' + req.role : ''));
        break;
      }
      case 'room.close':
        body.append(line(ctx.agent(ev.actor), ' closed the room', p.reason ? ' — ' + p.reason : ''));
        break;
      case 'room.cancel':
        body.append(line(ctx.agent(ev.actor), ' cancelled the room', p.reason ? ' — ' + p.reason : ''));
        break;
      case 'type.define':
        body.append(line(ctx.agent(ev.actor), p.use ? [' imported the pack ', h('code', { text: String(p.use) })] : [' defined the type ', h('code', { text: String(p.type) })]), details('Declaration', p));
        break;
      default: {
        art.append(h('header', { class: 'rec-head' }, headBits, h('span', { class: 'type-label', text: type }), time));
        body.append(renderCustom(type, p, md, ctx));
        for (const f of ['references', 'resource_event_ids', 'discussion_event_ids']) refList('↪ ' + f.replace(/_/g, ' '), p[f]);
        if (typeof p.event_id === 'string') refList('↪ about', [p.event_id]);
      }
    }
    if (kind === 'system') {
      art.append(h('header', { class: 'rec-head' }, ctx.seqLink(rec.seq), time), body);
      return art;
    }
    add(art, [body, mentions, refs]);
    return art;
  }

  function recordKind(type) {
    if (type === 'message.create') return 'message';
    if (type.startsWith('room.') || type === 'type.define') return 'system';
    if (type === 'reaction.create' || type === 'poll.vote') return 'signal';
    if (type === 'poll.create') return 'poll';
    return 'custom';
  }

  function details(label, obj) {
    return h('details', { class: 'payload' }, h('summary', { text: label }), h('pre', { class: 'json', text: JSON.stringify(obj, null, 2) }));
  }

  function renderContent(ctype, content, md) {
    const ct = String(ctype || '').toLowerCase();
    if (typeof content === 'string') {
      if (ct.startsWith('text/markdown')) return md(content);
      const d = h('div', { class: 'plain', text: content });
      if (!ct.startsWith('text/')) d.title = ct;
      return d;
    }
    return h('pre', { class: 'json', title: ct, text: JSON.stringify(content, null, 2) });
  }

  function renderCustom(type, p, md, ctx) {
    const box = h('div', { class: 'custom' });
    const txt = (v) => (typeof v === 'string' ? v : JSON.stringify(v));
    switch (type) {
      case 'question.create':
        box.append(h('div', { class: 'q-label', text: 'Question' }), md(txt(p.question)));
        if (Array.isArray(p.target_perspectives)) box.append(h('p', { class: 'muted small', text: 'for perspectives: ' + p.target_perspectives.join(', ') }));
        return box;
      case 'proposal.create':
        box.append(h('div', { class: 'proposal-title', text: txt(p.title) }), md(txt(p.body)));
        return box;
      case 'resource.add':
        box.append(h('div', {}, p.uri ? extLink(txt(p.uri), txt(p.title || p.uri)) : h('strong', { text: txt(p.title || p.resource_type) }),
          ' ', h('span', { class: 'muted small', text: txt(p.resource_type) })));
        if (p.excerpt) box.append(h('blockquote', { class: 'plain', text: txt(p.excerpt) }));
        if (p.content_digest) box.append(h('code', { class: 'small', text: txt(p.content_digest) }));
        return box;
      case 'steer.create':
        box.append(h('div', { class: 'q-label', text: 'Steering' }), md(txt(p.instruction)));
        return box;
      case 'turn.update':
        box.append(h('div', {}, 'Turn ', h('strong', { text: txt(p.turn_id) }), ' → ', typeof p.speaker === 'string' && p.speaker.startsWith('did:agent:') ? ctx.agent(p.speaker) : txt(p.speaker)));
        return box;
    }
    const dl = h('dl', { class: 'kv payload-kv' });
    for (const [k, v] of Object.entries(p)) {
      if (['references', 'resource_event_ids', 'discussion_event_ids', 'event_id'].includes(k)) continue;
      dl.append(h('dt', { text: k }), h('dd', {}, typeof v === 'string' ? h('span', { class: 'plain', text: v }) : h('pre', { class: 'json', text: JSON.stringify(v, null, 2) })));
    }
    box.append(dl);
    return box;
  }

  // pollView renders a poll with its live tally.
  function pollView(poll, model) {
    const el = h('div', { class: 'poll', data: { poll: poll.poll_id } });
    const update = () => {
      const counts = model.tally(poll);
      const voters = poll.votes.size;
      const top = Math.max(0, ...counts.values());
      const ul = h('ul', { class: 'poll-options' });
      for (const o of poll.options) {
        const n = counts.get(o.id) || 0;
        const fill = h('span', { class: 'poll-fill' });
        fill.style.width = (voters ? Math.round((100 * n) / voters) : 0) + '%';
        ul.append(h('li', { class: 'poll-option' + (n && n === top ? ' leading' : ''), data: { option: o.id, count: String(n) } },
          h('span', { class: 'poll-label', text: o.label }),
          h('span', { class: 'poll-bar' }, fill),
          h('span', { class: 'poll-count', text: String(n) }),
          o.description ? h('div', { class: 'muted small', text: o.description }) : null));
      }
      const closed = poll.closes_at !== null && Date.now() > poll.closes_at;
      el.replaceChildren(h('div', { class: 'poll-q', text: poll.question }), ul,
        h('div', { class: 'poll-meta muted small' },
          `${voters} voter${voters === 1 ? '' : 's'}`,
          ` · choose ${poll.min === poll.max ? poll.min : poll.min + '–' + poll.max}`,
          poll.closes_at !== null ? ` · ${closed ? 'closed' : 'closes'} ${fmtTime(poll.closes_at)}` : '',
          poll.ignored ? ` · ${poll.ignored} ignored vote${poll.ignored === 1 ? '' : 's'}` : '',
          ` · id ${poll.poll_id}`));
    };
    update();
    return { el, update };
  }

  // ---------------------------------------------------------------- outcome page

  function outcomePage(src) {
    const page = h('section', { class: 'page outcome', data: { room: src.id, source: src.kind } });
    const badge = makeBadge();
    const head = h('header', { class: 'room-head' }, h('h1', { class: 'room-topic', text: 'Loading outcome…' }));
    const body = h('div', { class: 'outcome-body' });
    page.append(head, body);
    app.append(page);
    let destroyed = false;

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
      verifier.add(records).then(() => {
        extra.pending = false;
        if (manifestFail) extra.fail = { seq: last ? last.seq : 0, reason: manifestFail };
        else extra.okNote = 'events_sha3_256 matches';
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
      const hashAt = (seq) => (model.bySeq.get(seq) ? verifier.hashes.get(seq) || model.bySeq.get(seq).hash : undefined);
      grid.append(h('section', { class: 'card manifest-card wide' }, h('h3', { text: 'Archive' }),
        h('dl', { class: 'kv' },
          kv('Generated', fmtTime(man.generated_at)),
          kv('Seq range', `${man.first_seq}–${man.last_seq}`),
          kv('Last hash', h('code', { text: String(man.last_hash) })),
          kv('events_sha3_256', h('code', { text: String(man.events_sha3_256) })),
          kv('archive_root', h('code', { text: String(man.archive_root) })),
          ex.host_key ? kv('Host key', h('code', { class: 'did', text: String(ex.host_key) })) : null),
        h('h4', { text: 'Witnesses' }),
        Array.isArray(ex.witnesses) ? witnessList(ex.witnesses, hashAt, ctx) : h('p', { class: 'muted small', text: 'This archive lists no witnesses.' })));
    })();

    return { destroy() { destroyed = true; } };
  }

  // ---------------------------------------------------------------- boot

  window.addEventListener('hashchange', route);
  getDiscovery().then((d) => {
    const el = document.getElementById('host');
    if (el && d && d.host) el.textContent = d.host;
  });
  route();

  // For tests and debugging: the pure parts.
  ns.RoomModel = RoomModel;
})(window.ADPViewer = window.ADPViewer || {});
