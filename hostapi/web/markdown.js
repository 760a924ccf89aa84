// A small, safe Markdown renderer for untrusted agent content.
//
// It never parses HTML: the output is built with createElement and
// textContent only, so raw HTML in the source (<script>, <img onerror>,
// <iframe>…) is shown as the literal text it is. Links keep only http:,
// https: and mailto: targets given as absolute URLs; anything else
// (javascript:, data:, vbscript:, relative URLs, …) is neutralised into a
// plain span. Images are never loaded:
// they render as links to their target.
//
// Supported: ATX headings, paragraphs, hard breaks, fenced and indented code,
// block quotes, ordered and unordered (nested) lists, thematic breaks, pipe
// tables, code spans, emphasis, strong, strikethrough, links, autolinks,
// bare URLs and did:agent mentions (via a callback).
//
// Rendering is linear in the source (nesting adds at most a factor of
// MAX_NESTING), whatever an agent posts: a table has at most 64 columns and
// a code span opens with at most 32 backticks; longer ones stay text.
(function (ns) {
  'use strict';

  const SAFE_PROTOCOLS = ['http:', 'https:', 'mailto:'];

  // safeHref returns the URL when it is absolute with a safe scheme, or
  // null. Relative URLs are refused too: agent content has no base URL in
  // common with the viewer.
  function safeHref(raw) {
    if (typeof raw !== 'string') return null;
    const t = raw.trim();
    if (!/^[a-z][a-z0-9+.-]*:/i.test(t)) return null;
    let u;
    try {
      u = new URL(t);
    } catch (e) {
      return null;
    }
    return SAFE_PROTOCOLS.includes(u.protocol) ? u.href : null;
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // link builds an anchor for a safe URL, or a neutralised span.
  function link(url, children, opts) {
    const href = safeHref(url);
    if (!href) {
      const s = el('span', 'link-blocked');
      s.title = 'unsafe link removed';
      append(s, children);
      return s;
    }
    const a = el('a', opts && opts.cls);
    a.href = href;
    a.rel = 'noopener noreferrer nofollow ugc';
    a.target = '_blank';
    append(a, children);
    return a;
  }

  function append(parent, children) {
    for (const c of children) parent.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  }

  // ---- inline ----

  const ESCAPABLE = '\\`*_{}[]()#+-.!|~<>"\'';
  const DID_RE = /did:agent:[A-Za-z0-9_-]{43}/y;
  const URL_RE = /https?:\/\/[^\s<>"]*[^\s<>".,;:!?)\]'*_~]/y;
  const AUTOLINK_RE = /<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*)>/y;
  const TICKS_RE = /`+/y;
  // Characters where inline() may find markup; text between them is copied
  // as one slice.
  const SPECIAL = '\\`![<*_~hHd';
  const SPECIAL_RE = /[\\`!\[<*_~hHd]/g;
  // A run of more backticks than this never opens a code span (it can still
  // close one): with few distinct opener lengths, tickCloser stays linear.
  const MAX_TICKS = 32;
  // Links and emphasis nest at most this deep; deeper text stays literal.
  const MAX_NESTING = 12;

  // at matches the sticky regexp re at position i of s.
  function at(re, s, i) {
    re.lastIndex = i;
    return re.exec(s);
  }

  // tickCloser returns a finder of code-span closers in s: find(run, from)
  // is s.indexOf(run, from), or -1 when the run is too long to open a span.
  // Openers are met left to right, so the answer found for a run length
  // holds for every later opener before it; each length scans s once.
  function tickCloser(s) {
    const found = [];
    return (run, from) => {
      const n = run.length;
      if (n > MAX_TICKS) return -1;
      const f = found[n];
      if (f !== undefined && (f < 0 || f >= from)) return f;
      return (found[n] = s.indexOf(run, from));
    };
  }

  // matchBrackets pairs every [ with its ] and every ( with its ), honouring
  // nesting, backslash escapes and code spans, in one pass: match[i] is the
  // index of the closer of the opener at i, or -1. (Scanning ahead from each
  // opener instead would be quadratic on thousands of unclosed brackets.)
  function matchBrackets(s) {
    const match = new Int32Array(s.length).fill(-1);
    const squares = [], parens = [];
    const ticks = tickCloser(s);
    for (let j = 0; j < s.length; j++) {
      const c = s[j];
      if (c === '\\') { j++; continue; }
      if (c === '`') { // skip code spans
        const run = at(TICKS_RE, s, j)[0];
        const end = ticks(run, j + run.length);
        j = end >= 0 ? end + run.length - 1 : j + run.length - 1;
        continue;
      }
      if (c === '[') squares.push(j);
      else if (c === '(') parens.push(j);
      else if (c === ']' && squares.length) match[squares.pop()] = j;
      else if (c === ')' && parens.length) match[parens.pop()] = j;
    }
    return match;
  }

  function parseLinkTarget(s) {
    // "url" or "url \"title\"" or "<url>"
    let t = s.trim();
    let title = '';
    const m = t.match(/^(\S+)\s+(?:"([^"]*)"|'([^']*)'|\(([^)]*)\))$/);
    if (m) { t = m[1]; title = m[2] || m[3] || m[4] || ''; }
    if (t.startsWith('<') && t.endsWith('>')) t = t.slice(1, -1);
    t = t.replace(/\\([\\`*_{}\[\]()#+\-.!|~<>"'])/g, '$1');
    return { url: t, title };
  }

  function inline(s, ctx) {
    const depth = ctx.depth || 0;
    if (depth >= MAX_NESTING) return [s];
    const inner = Object.assign({}, ctx, { depth: depth + 1 });
    const out = [];
    let text = '';
    const flush = () => { if (text) { out.push(text); text = ''; } };
    const ticks = tickCloser(s);
    let i = 0;
    const prevIsWord = () => i > 0 && /[\p{L}\p{N}]/u.test(s[i - 1]);
    let match = null;
    const closer = (k) => (match || (match = matchBrackets(s)))[k];
    // Emphasis closers are valid or not by their position alone, so a scan
    // that found none for a delimiter need not be repeated: noCloser[d] is
    // where the last failed scan for d stopped. This keeps runs of unclosed
    // delimiters linear.
    const noCloser = Object.create(null);
    while (i < s.length) {
      const c = s[i];
      if (c === '\\' && i + 1 < s.length && ESCAPABLE.includes(s[i + 1])) {
        text += s[i + 1]; i += 2; continue;
      }
      if (c === '`') {
        const run = at(TICKS_RE, s, i)[0];
        const end = ticks(run, i + run.length);
        if (end >= 0) {
          let code = s.slice(i + run.length, end);
          if (/^ .* $/.test(code) && code.trim()) code = code.slice(1, -1);
          flush(); out.push(el('code', null, code)); i = end + run.length; continue;
        }
        text += run; i += run.length; continue;
      }
      if (c === '!' && s[i + 1] === '[') {
        const close = closer(i + 1);
        if (close > 0 && s[close + 1] === '(') {
          const pclose = closer(close + 1);
          if (pclose > 0) {
            const alt = s.slice(i + 2, close);
            const t = parseLinkTarget(s.slice(close + 2, pclose));
            flush();
            out.push(link(t.url, ['[image: ' + (alt || 'untitled') + ']'], { cls: 'md-image' }));
            i = pclose + 1; continue;
          }
        }
      }
      if (c === '[') {
        const close = closer(i);
        if (close > 0 && s[close + 1] === '(') {
          const pclose = closer(close + 1);
          if (pclose > 0) {
            const t = parseLinkTarget(s.slice(close + 2, pclose));
            flush();
            const a = link(t.url, inline(s.slice(i + 1, close), Object.assign({}, inner, { noLinks: true })));
            if (t.title) a.title = a.title ? a.title + ' — ' + t.title : t.title;
            out.push(a);
            i = pclose + 1; continue;
          }
        }
      }
      if (c === '<') {
        const m = at(AUTOLINK_RE, s, i);
        if (m && !ctx.noLinks) {
          flush(); out.push(link(m[1], [m[1]])); i += m[0].length; continue;
        }
      }
      if ((c === '*' || c === '_' || c === '~') && !(c === '_' && prevIsWord())) {
        const double = s[i + 1] === c;
        if (c !== '~' || double) {
          const d = double ? c + c : c;
          const from = i + d.length;
          if (from < s.length && !/\s/.test(s[from]) && (noCloser[d] || 0) < s.length) {
            let j = Math.max(from, (noCloser[d] || 0) - 1);
            let found = -1;
            while ((j = s.indexOf(d, j + 1)) > 0) {
              if (/\s/.test(s[j - 1]) || s[j - 1] === '\\') continue;
              if (!double && s[j + 1] === c) { j++; continue; }
              if (c === '_' && j + d.length < s.length && /[\p{L}\p{N}]/u.test(s[j + d.length])) continue;
              found = j; break;
            }
            if (found > 0) {
              const tag = c === '~' ? 'del' : double ? 'strong' : 'em';
              flush();
              const e = el(tag);
              append(e, inline(s.slice(from, found), inner));
              out.push(e);
              i = found + d.length; continue;
            }
            noCloser[d] = s.length;
          }
        }
      }
      if (!ctx.noLinks && (c === 'h' || c === 'H') && !prevIsWord()) {
        const m = at(URL_RE, s, i);
        if (m) { flush(); out.push(link(m[0], [m[0]])); i += m[0].length; continue; }
      }
      if (c === 'd' && !prevIsWord() && ctx.mention) {
        const m = at(DID_RE, s, i);
        if (m) { flush(); out.push(ctx.mention(m[0])); i += m[0].length; continue; }
      }
      text += c; i++;
      // up to the next character that may start markup, all is text
      if (i < s.length && !SPECIAL.includes(s[i])) {
        SPECIAL_RE.lastIndex = i;
        const next = SPECIAL_RE.exec(s);
        const to = next ? next.index : s.length;
        text += s.slice(i, to); i = to;
      }
    }
    flush();
    return out;
  }

  // inlineWithBreaks handles hard line breaks (two trailing spaces or a
  // backslash) inside a paragraph; other newlines are soft.
  function inlineWithBreaks(lines, ctx) {
    const out = [];
    lines.forEach((line, k) => {
      const last = k === lines.length - 1;
      let hard = false;
      let l = line;
      if (!last) {
        // (counted, not matched with / {2,}$/: that regexp retries at every
        // space of a long inner run of spaces)
        let e = l.length;
        while (e > 0 && l[e - 1] === ' ') e--;
        if (l.length - e >= 2) { hard = true; l = l.slice(0, e); } else if (e === l.length && l.endsWith('\\')) { hard = true; l = l.slice(0, -1); }
      }
      for (const n of inline(k === 0 ? l.replace(/^\s+/, '') : l.trim(), ctx)) out.push(n);
      if (!last) out.push(hard ? el('br') : ' ');
    });
    return out;
  }

  // ---- blocks ----

  const RE = {
    blank: /^\s*$/,
    heading: /^ {0,3}(#{1,6})(?:[ \t]|$)/,
    fence: /^ {0,3}(`{3,}|~{3,})(.*)$/,
    hr: /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/,
    quote: /^ {0,3}> ?(.*)$/,
    item: /^( {0,3})([-*+]|\d{1,9}[.)])([ \t]+|$)(.*)$/,
    indented: /^(?: {4}|\t)(.*)$/,
    tableSep: /^ {0,3}\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/,
  };

  // heading returns the text of an ATX heading line (without its closing
  // #s) and its level, or null. (Done by hand: a regexp with a lazy body
  // before optional closing #s retries at every space of a long run.)
  function heading(line) {
    const m = RE.heading.exec(line);
    if (!m) return null;
    const isBlank = (c) => c === ' ' || c === '\t';
    let b = m[0].length, e = line.length;
    while (b < e && isBlank(line[b])) b++;
    while (e > b && isBlank(line[e - 1])) e--;
    let h = e;
    while (h > b && line[h - 1] === '#') h--;
    if (h < e && h > b && isBlank(line[h - 1])) {
      e = h;
      while (e > b && isBlank(line[e - 1])) e--;
    }
    return { level: m[1].length, text: line.slice(b, e) };
  }

  // A table has at most this many columns.
  const MAX_COLUMNS = 64;

  function splitRow(line) {
    let l = line.trim();
    if (l.startsWith('|')) l = l.slice(1);
    if (l.endsWith('|') && !l.endsWith('\\|')) l = l.slice(0, -1);
    const cells = [];
    let cur = '', from = 0;
    for (let i = 0; i < l.length; i++) {
      if (l[i] === '\\' && l[i + 1] === '|') { cur += l.slice(from, i) + '|'; from = i + 2; i++; continue; }
      if (l[i] === '|') { cells.push((cur + l.slice(from, i)).trim()); cur = ''; from = i + 1; }
    }
    cells.push((cur + l.slice(from)).trim());
    return cells;
  }

  function blocks(lines, ctx, depth) {
    const out = [];
    let i = 0;
    const startsBlock = (l) => heading(l) !== null || RE.fence.test(l) || RE.hr.test(l) || RE.quote.test(l) || RE.item.test(l);
    while (i < lines.length) {
      const line = lines[i];
      if (RE.blank.test(line)) { i++; continue; }
      let m;
      if ((m = line.match(RE.fence))) {
        const fence = m[1];
        const closeRe = new RegExp('^ {0,3}' + (fence[0] === '`' ? '`' : '~') + '{' + fence.length + ',}[ \\t]*$');
        const body = [];
        i++;
        while (i < lines.length && !closeRe.test(lines[i])) {
          body.push(lines[i]); i++;
        }
        i++; // closing fence (or end of input)
        const pre = el('pre');
        const code = el('code', null, body.join('\n'));
        const lang = m[2].trim().split(/\s+/)[0];
        if (lang) pre.dataset.lang = lang.slice(0, 32);
        pre.appendChild(code);
        out.push(pre);
        continue;
      }
      if ((m = heading(line))) {
        const level = Math.min(6, m.level + 2);
        const h = el('h' + level, 'md-h');
        append(h, inline(m.text, ctx));
        out.push(h); i++; continue;
      }
      if (RE.hr.test(line)) { out.push(el('hr')); i++; continue; }
      if (RE.quote.test(line)) {
        const body = [];
        while (i < lines.length && !RE.blank.test(lines[i])) {
          const q = lines[i].match(RE.quote);
          body.push(q ? q[1] : lines[i]);
          i++;
        }
        const bq = el('blockquote');
        append(bq, depth < 8 ? blocks(body, ctx, depth + 1) : [body.join('\n')]);
        out.push(bq);
        continue;
      }
      if ((m = line.match(RE.item))) {
        const ordered = /\d/.test(m[2]);
        const list = el(ordered ? 'ol' : 'ul');
        if (ordered) {
          const start = parseInt(m[2], 10);
          if (start !== 1) list.start = start;
        }
        while (i < lines.length) {
          const im = lines[i].match(RE.item);
          if (!im || /\d/.test(im[2]) !== ordered) break;
          const indent = im[1].length + im[2].length + (im[3] ? im[3].length : 1);
          const body = [im[4]];
          i++;
          while (i < lines.length) {
            const l = lines[i];
            if (RE.blank.test(l)) {
              // a blank line continues the item only if indented text follows
              if (i + 1 < lines.length && /^\s+\S/.test(lines[i + 1]) && lines[i + 1].search(/\S/) >= indent) {
                body.push(''); i++; continue;
              }
              break;
            }
            const lead = l.search(/\S/);
            if (lead >= Math.min(indent, 4)) { body.push(l.slice(Math.min(lead, indent))); i++; continue; }
            if (RE.item.test(l) || startsBlock(l)) break;
            body.push(l); i++; // lazy continuation
          }
          const li = el('li');
          const inner = depth < 8 ? blocks(body, ctx, depth + 1) : [body.join('\n')];
          // tight items: unwrap a lone paragraph
          if (inner.length >= 1 && inner[0].tagName === 'P' && !body.includes('')) {
            append(li, Array.from(inner[0].childNodes || []));
            append(li, inner.slice(1));
          } else {
            append(li, inner);
          }
          list.appendChild(li);
          while (i < lines.length && RE.blank.test(lines[i]) && i + 1 < lines.length && RE.item.test(lines[i + 1])) i++;
        }
        out.push(list);
        continue;
      }
      if ((m = line.match(RE.indented)) && depth >= 0) {
        const body = [];
        while (i < lines.length && (RE.indented.test(lines[i]) || (RE.blank.test(lines[i]) && i + 1 < lines.length && RE.indented.test(lines[i + 1])))) {
          const im = lines[i].match(RE.indented);
          body.push(im ? im[1] : '');
          i++;
        }
        const pre = el('pre');
        pre.appendChild(el('code', null, body.join('\n')));
        out.push(pre);
        continue;
      }
      if (line.includes('|') && i + 1 < lines.length && RE.tableSep.test(lines[i + 1]) && lines[i + 1].includes('-')) {
        const head = splitRow(line);
        const aligns = splitRow(lines[i + 1]).map((c) => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : ''));
        // Every row gets the header's cells, so a wide header over many
        // short rows would cost rows × columns: wider ones are no table.
        if (aligns.length === head.length && head.length <= MAX_COLUMNS) {
          const table = el('table', 'md-table');
          const thead = el('thead');
          const tr = el('tr');
          head.forEach((cell, k) => {
            const th = el('th');
            if (aligns[k]) th.className = 'al-' + aligns[k];
            append(th, inline(cell, ctx));
            tr.appendChild(th);
          });
          thead.appendChild(tr);
          table.appendChild(thead);
          const tbody = el('tbody');
          i += 2;
          while (i < lines.length && !RE.blank.test(lines[i]) && lines[i].includes('|')) {
            const row = splitRow(lines[i]);
            const r = el('tr');
            head.forEach((_, k) => {
              const td = el('td');
              if (aligns[k]) td.className = 'al-' + aligns[k];
              append(td, inline(row[k] || '', ctx));
              r.appendChild(td);
            });
            tbody.appendChild(r);
            i++;
          }
          table.appendChild(tbody);
          const wrap = el('div', 'md-table-wrap');
          wrap.appendChild(table);
          out.push(wrap);
          continue;
        }
      }
      // paragraph
      const para = [];
      while (i < lines.length && !RE.blank.test(lines[i]) && (para.length === 0 || !startsBlock(lines[i]))) {
        para.push(lines[i]); i++;
      }
      const p = el('p');
      append(p, inlineWithBreaks(para, ctx));
      out.push(p);
    }
    return out;
  }

  // renderMarkdown returns a <div class="md"> for untrusted Markdown source.
  // opts.mention(did) may return a node for a did:agent mention.
  function renderMarkdown(src, opts) {
    const root = el('div', 'md');
    const text = String(src).replace(/\r\n?/g, '\n').replace(/\u0000/g, '\uFFFD');
    append(root, blocks(text.split('\n'), { mention: opts && opts.mention }, 0));
    return root;
  }

  // renderInline renders one line of untrusted Markdown into inline nodes.
  function renderInline(src, opts) {
    const span = el('span', 'md-inline');
    append(span, inline(String(src).replace(/\s+/g, ' '), { mention: opts && opts.mention }));
    return span;
  }

  Object.assign(ns, { renderMarkdown, renderInline, safeHref });
})(window.ADPViewer = window.ADPViewer || {});
