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
//
// The scripts (index.html loads them in order, all from this origin under
// the CSP): sha3.js, verify.js, markdown.js — hashing, signatures,
// canonical JSON, Markdown; base.js — DOM builder, formatting, API; model.js
// — RoomModel; records.js — one record's row; cards.js — room side cards;
// members.js, transcript.js, live.js, room.js — the room page; directory.js;
// outcome.js; and this file, the router.
(function (V) {
  'use strict';

  const { h, localSource, mirrorSource, directoryPage, roomPage, outcomePage, getDiscovery } = V;
  const app = V.app;

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

  // ---------------------------------------------------------------- boot

  window.addEventListener('hashchange', route);
  getDiscovery().then((d) => {
    const el = document.getElementById('host');
    if (el && d && d.host) el.textContent = d.host;
  });
  route();
})(window.ADPViewer = window.ADPViewer || {});
