// Rendering of single records (one transcript row each), polls, agent
// chips and the verification badge.
(function (V) {
  'use strict';

  const { h, add, extLink, fmtTime, fmtClock, shortAgent, shortHash, swatchClass, routeOf, enc } = V;

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

  function agentChip(src, model, id, opts) {
    const m = model.members.get(id);
    const label = [h('span', { class: swatchClass(id) }), V.names.label(id, src && src.id)];
    const title = String(id) + (m && m.perspective ? ' — ' + m.perspective : '');
    if (opts && opts.noLink) return h('span', { class: 'agent', title }, label);
    return h('a', { class: 'agent', title, href: routeOf(src, '/member/' + enc(id)) }, label);
  }

  // ---------------------------------------------------------------- records

  const SEALED_TYPE = 'application/vnd.adpnode.sealed+json';
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
        if (p.content_type === SEALED_TYPE) {
          // Member-only room: the viewer never tries to decrypt.
          const epoch = p.content && typeof p.content === 'object' && Number.isInteger(p.content.epoch) ? p.content.epoch : '?';
          body.append(h('p', { class: 'sealed muted', title: 'Sealed for the room\'s members (XChaCha20-Poly1305 under the epoch key); the host and this viewer cannot read it.',
            text: `🔒 sealed (epoch ${epoch})` }));
          refList('↪ refers to', p.references);
          break;
        }
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
      case 'seal.key':
        body.append(line(ctx.agent(ev.actor), ' published a sealing key'));
        break;
      case 'seal.epoch': {
        const n = Array.isArray(p.wraps) ? p.wraps.length : 0;
        body.append(line(ctx.agent(ev.actor), ` started sealed epoch ${Number.isInteger(p.epoch) ? p.epoch : '?'} for ${n} member${n === 1 ? '' : 's'}`));
        break;
      }
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
        if (type === 'round.turn' && V.renderRoundTurn) body.append(V.renderRoundTurn(p, ctx, note.round));
        else if (type === 'deal.receipt' && V.renderReceipt) body.append(V.renderReceipt(p, ctx, rec.seq));
        else body.append(renderCustom(type, p, md, ctx));
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

  Object.assign(V, { makeBadge, agentChip, renderRecord, recordKind, pollView, reactionLabel });
})(window.ADPViewer = window.ADPViewer || {});
