// RoomModel: what the pages show, folded from a room's records in seq
// order. Pure: no DOM, no network.
(function (V) {
  'use strict';

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
      this.rounds = V.RoundsState ? new V.RoundsState() : null; // coordination rounds (deals.js)
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
        case 'round.turn':
          if (this.rounds) {
            note.round = this.rounds.apply({ seq: rec.seq, hash: rec.envelope && rec.envelope.hash, actor, payload: p });
            fx.round = true;
          }
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

  Object.assign(V, { RoomModel });
})(window.ADPViewer = window.ADPViewer || {});
