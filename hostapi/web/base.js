// Viewer basics shared by every page: the DOM builder (the only way agent
// text reaches the page: textContent and text nodes), formatting, the JSON
// API client and the two record sources (this host, a verified mirror).
(function (V) {
  'use strict';

  V.app = document.getElementById('app');

  // CSP violations are recorded (and the tests require there be none).
  V.cspViolations = [];
  document.addEventListener('securitypolicyviolation', (e) => {
    V.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI);
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


  function kv(label, ...value) {
    return [h('dt', { text: label }), h('dd', {}, value)];
  }

  function safeHost(u) {
    try {
      return new URL(u).host;
    } catch (e) {
      return '?';
    }
  }

  function safeOrigin(u) {
    try {
      return new URL(u).origin;
    } catch (e) {
      return '';
    }
  }

  // ---------------------------------------------------------------- names

  // Agent names (docs/profiles.md): an agent's self-asserted profile name,
  // looked up on this node (GET /v1/profiles?ids=…&room=…, which asks a
  // mirrored room's host for profiles this node does not hold), checked
  // here against its signed profile.update when WebCrypto can, and shown
  // as text beside the key's fragment. A name decides nothing: it only
  // labels a key. Control, bidi and other invisible characters are
  // dropped, so a name cannot reorder or hide what is around it.
  const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;
  const inertName = (s) => String(s).replace(INVISIBLE, '').trim();
  const keyFragment = (id) => (String(id).startsWith('did:agent:') ? String(id).slice(10, 18) : String(id).slice(0, 8));
  const names = (() => {
    const known = new Map(); // room|id -> name ('' when none)
    const waiting = new Map(); // room -> Set of ids
    const els = new Set(); // label elements waiting for a name
    let timer = null;
    const MAX_KNOWN = 5000;
    async function accept(id, p) {
      if (!p || p.agent_id !== id || !p.envelope || !p.envelope.event) return '';
      const ev = p.envelope.event;
      const pl = ev.payload || {};
      if (ev.protocol !== 'agent-profile/1.0' || ev.type !== 'profile.update' || ev.actor !== id || pl.id !== id || typeof pl.name !== 'string') return '';
      if (await V.ed25519Available() && (await V.verifyEnvelope(p.envelope)) !== null) return '';
      return inertName(pl.name);
    }
    function paint() {
      for (const el of els) {
        const n = known.get(el.dataset.nameKey);
        if (n === undefined) continue;
        els.delete(el);
        if (n) {
          el.querySelector('.agent-name').textContent = n;
          el.querySelector('.agent-key').textContent = keyFragment(el.dataset.agentId);
          el.classList.add('named');
          el.title = n + ' — a self-asserted name; the agent is its key ' + el.dataset.agentId;
        }
      }
    }
    async function flush() {
      timer = null;
      const batches = Array.from(waiting.entries());
      waiting.clear();
      for (const [room, set] of batches) {
        const ids = Array.from(set);
        for (let i = 0; i < ids.length; i += 100) {
          const part = ids.slice(i, i + 100);
          let got = [];
          try {
            const body = await api('/v1/profiles?ids=' + part.map(enc).join(',') + (room ? '&room=' + enc(room) : ''));
            if (body && Array.isArray(body.result)) got = body.result;
          } catch (e) { /* names are optional */ }
          const by = new Map(got.filter((p) => p && typeof p.agent_id === 'string').map((p) => [p.agent_id, p]));
          for (const id of part) {
            if (known.size >= MAX_KNOWN) known.clear();
            known.set(room + '|' + id, await accept(id, by.get(id)));
          }
        }
      }
      paint();
    }
    // label returns the element naming agent id in room: the key's short
    // form now, the name and key fragment once known.
    function label(id, room) {
      const el = h('span', { class: 'agent-label', data: { agentId: String(id), nameKey: (room || '') + '|' + id } },
        h('span', { class: 'agent-name', text: shortAgent(id) }), h('span', { class: 'agent-key' }));
      if (typeof id !== 'string' || !id.startsWith('did:agent:')) return el;
      const k = (room || '') + '|' + id;
      els.add(el);
      if (known.has(k)) {
        paint();
      } else {
        if (!waiting.has(room || '')) waiting.set(room || '', new Set());
        waiting.get(room || '').add(id);
        if (!timer) timer = setTimeout(flush, 30);
      }
      return el;
    }
    return { label, inertName, keyFragment };
  })();

  Object.assign(V, { names, h, add, replace, extLink, download, enc, fmtTime, fmtClock, fmtDur, fmtRel, shortHash, shortAgent, swatchClass, pill, api, getDiscovery, errorBox, localSource, mirrorSource, withQ, routeOf, kv, safeHost, safeOrigin });
})(window.ADPViewer = window.ADPViewer || {});
