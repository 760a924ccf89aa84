// Chain verification in the browser: JCS (RFC 8785), base64url, envelope
// hashes and Ed25519 signatures (WebCrypto), record hashes and pre_hash
// links (ADP §15). Nothing here trusts the host: every record shown as
// verified was recomputed from its signed bytes.
(function (ns) {
  'use strict';

  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const B64_INDEX = new Int16Array(128).fill(-1);
  for (let i = 0; i < 64; i++) B64_INDEX[B64.charCodeAt(i)] = i;

  // b64u encodes bytes as unpadded base64url.
  function b64u(bytes) {
    let out = '';
    let i = 0;
    for (; i + 2 < bytes.length; i += 3) {
      const n = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
      out += B64[n >> 18] + B64[(n >> 12) & 63] + B64[(n >> 6) & 63] + B64[n & 63];
    }
    if (bytes.length - i === 1) {
      const n = bytes[i] << 16;
      out += B64[n >> 18] + B64[(n >> 12) & 63];
    } else if (bytes.length - i === 2) {
      const n = (bytes[i] << 16) | (bytes[i + 1] << 8);
      out += B64[n >> 18] + B64[(n >> 12) & 63] + B64[(n >> 6) & 63];
    }
    return out;
  }

  // b64uDecode decodes canonical unpadded base64url, or returns null.
  function b64uDecode(s) {
    if (typeof s !== 'string' || s.length % 4 === 1) return null;
    const out = new Uint8Array(Math.floor((s.length * 3) / 4));
    let bits = 0, acc = 0, o = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      const v = c < 128 ? B64_INDEX[c] : -1;
      if (v < 0) return null;
      acc = (acc << 6) | v;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out[o++] = (acc >> bits) & 0xff;
      }
    }
    if (acc & ((1 << bits) - 1)) return null; // non-zero trailing bits: not canonical
    return out;
  }

  const enc = new TextEncoder();
  const utf8 = (s) => enc.encode(s);

  // jcs returns the RFC 8785 canonical form of a parsed JSON value: object
  // members sorted by UTF-16 code units, strings and numbers as ECMAScript
  // JSON.stringify writes them.
  function jcs(v) {
    if (v === null) return 'null';
    switch (typeof v) {
      case 'boolean':
        return v ? 'true' : 'false';
      case 'number':
        if (!Number.isFinite(v)) throw new TypeError('JCS: non-finite number');
        return JSON.stringify(v);
      case 'string':
        return JSON.stringify(v);
      case 'object': {
        if (Array.isArray(v)) return '[' + v.map(jcs).join(',') + ']';
        const keys = Object.keys(v).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        return '{' + keys.map((k) => JSON.stringify(k) + ':' + jcs(v[k])).join(',') + '}';
      }
    }
    throw new TypeError('JCS: unsupported value');
  }

  const hashB64 = (value) => b64u(ns.sha3_256(utf8(jcs(value))));

  // recordHash recomputes a record's hash (§15).
  function recordHash(r) {
    return hashB64({
      room_id: r.room_id, seq: r.seq, pre_hash: r.pre_hash,
      envelope_hash: r.envelope && r.envelope.hash, received_at: r.received_at,
    });
  }

  // Identity §2 strictness, as the host applies it: a point encoding must be
  // canonical (y < p) and not one of the small-order points.
  const SMALL_ORDER = [
    '0100000000000000000000000000000000000000000000000000000000000000',
    'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
    '0000000000000000000000000000000000000000000000000000000000000000',
    '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
    'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  ];
  function strictPoint(b) {
    const y = Uint8Array.from(b);
    y[31] &= 0x7f;
    if (y[31] === 0x7f && y[0] >= 0xed && y.subarray(1, 31).every((c) => c === 0xff)) return false;
    const h = Array.from(y, (c) => c.toString(16).padStart(2, '0')).join('');
    return !SMALL_ORDER.includes(h);
  }

  const keyCache = new Map();
  function importKey(pub) {
    const k = b64u(pub);
    if (!keyCache.has(k)) {
      keyCache.set(k, crypto.subtle.importKey('raw', pub, { name: 'Ed25519' }, false, ['verify']));
    }
    return keyCache.get(k);
  }

  // ed25519Available reports whether WebCrypto can verify Ed25519 here
  // (it needs a secure context: https, or http on localhost).
  let available = null;
  function ed25519Available() {
    if (available === null) {
      available = (async () => {
        if (!window.crypto || !crypto.subtle) return false;
        try {
          await crypto.subtle.importKey('raw', new Uint8Array(32).fill(9), { name: 'Ed25519' }, false, ['verify']);
          return true;
        } catch (e) {
          return false;
        }
      })();
    }
    return available;
  }

  // verifySignature checks an Ed25519 signature over msg under Identity §2.
  async function verifySignature(pub, msg, sig) {
    if (!pub || pub.length !== 32 || !sig || sig.length !== 64) return false;
    if (!strictPoint(pub) || !strictPoint(sig.subarray(0, 32))) return false;
    try {
      return await crypto.subtle.verify({ name: 'Ed25519' }, await importKey(pub), sig, msg);
    } catch (e) {
      return false;
    }
  }

  function actorKey(actor) {
    if (typeof actor !== 'string' || !actor.startsWith('did:agent:')) return null;
    const k = b64uDecode(actor.slice(10));
    return k && k.length === 32 ? k : null;
  }

  // verifyEnvelope checks {hash, event, signature}: the hash is
  // SHA3-256(JCS(event)) and the actor's key signed those 32 bytes.
  // It returns null when valid, or the reason it is not.
  async function verifyEnvelope(env) {
    if (!env || typeof env !== 'object' || !env.event || typeof env.event !== 'object') return 'envelope is malformed';
    let digest;
    try {
      digest = ns.sha3_256(utf8(jcs(env.event)));
    } catch (e) {
      return 'event cannot be canonicalized';
    }
    if (b64u(digest) !== env.hash) return 'envelope hash does not match SHA3-256(JCS(event))';
    const pub = actorKey(env.event.actor);
    if (!pub) return 'actor is not a did:agent key';
    const sig = b64uDecode(env.signature);
    if (!sig || sig.length !== 64) return 'signature is malformed';
    if (!(await verifySignature(pub, digest, sig))) return 'Ed25519 signature does not verify';
    return null;
  }

  // ChainVerifier checks records strictly in seq order from seq 1 and
  // reports the first failure. State: 'pending' (nothing yet), 'ok',
  // 'fail' (failSeq, reason) or 'unsupported' (no WebCrypto Ed25519).
  class ChainVerifier {
    constructor(roomID, onChange) {
      this.roomID = roomID;
      this.onChange = onChange || (() => {});
      this.state = 'pending';
      this.verifiedSeq = 0;
      this.lastHash = null;
      this.hashes = new Map(); // seq -> record hash, verified
      this.failSeq = 0;
      this.reason = '';
      this.queue = Promise.resolve();
      this.expect = null; // {seq, hash} a claim to check once reached
    }

    // add queues records that must continue the chain in order.
    add(records) {
      this.queue = this.queue.then(() => this._run(records));
      return this.queue;
    }

    // expectHead records a claim (e.g. the room resource's seq and hash)
    // that the verified chain must agree with.
    expectHead(seq, hash) {
      this.queue = this.queue.then(() => {
        this.expect = { seq, hash };
        this._checkExpect();
        this.onChange(this);
      });
      return this.queue;
    }

    fail(seq, reason) {
      if (this.state === 'fail') return;
      this.state = 'fail';
      this.failSeq = seq;
      this.reason = reason;
      this.onChange(this);
    }

    _checkExpect() {
      const e = this.expect;
      if (this.state === 'fail' || !e || !e.seq || e.seq > this.verifiedSeq) return;
      if (this.hashes.get(e.seq) !== e.hash) this.fail(e.seq, 'the room resource names another hash for this seq');
    }

    async _run(records) {
      if (this.state === 'fail' || this.state === 'unsupported') return;
      if (!(await ed25519Available())) {
        this.state = 'unsupported';
        this.reason = 'this browser cannot verify Ed25519 signatures here (WebCrypto needs https or localhost)';
        this.onChange(this);
        return;
      }
      for (const r of records) {
        const why = await this._check(r);
        if (why) {
          this.fail(typeof r.seq === 'number' ? r.seq : this.verifiedSeq + 1, why);
          return;
        }
        this.verifiedSeq = r.seq;
        this.lastHash = r.hash;
        this.hashes.set(r.seq, r.hash);
        this.state = 'ok';
      }
      this._checkExpect();
      this.onChange(this);
    }

    async _check(r) {
      if (!r || typeof r !== 'object') return 'record is malformed';
      if (r.seq !== this.verifiedSeq + 1) return 'seq ' + r.seq + ' does not follow ' + this.verifiedSeq;
      if (r.room_id !== this.roomID) return 'record belongs to another room';
      if (r.pre_hash !== this.lastHash) return 'pre_hash does not link to the previous record';
      if (typeof r.received_at !== 'number') return 'received_at is missing';
      const why = await verifyEnvelope(r.envelope);
      if (why) return why;
      const ev = r.envelope.event;
      if (ev.type === 'room.create' ? 'room_id' in ev : ev.room_id !== this.roomID) {
        return 'the signed event names another room';
      }
      if (recordHash(r) !== r.hash) return 'record hash does not match SHA3-256(JCS(acceptance metadata))';
      return null;
    }
  }

  // verifyAssertion checks a host assertion (checkpoint, cosignature): an
  // envelope signed by its actor with the agent rules (DECISIONS 13).
  async function verifyAssertion(env, type) {
    const why = await verifyEnvelope(env);
    if (why) return why;
    if (env.event.protocol !== 'adp-federation/1.0' || env.event.type !== type) return 'not a ' + type + ' assertion';
    return null;
  }

  // verifyCheckpoint returns {ok, reason, cp} for a record.checkpoint.
  async function verifyCheckpoint(env) {
    const why = await verifyAssertion(env, 'record.checkpoint');
    if (why) return { ok: false, reason: why };
    const cp = env.event.payload || {};
    if (cp.host !== env.event.actor) return { ok: false, reason: 'checkpoint names a host other than its signer', cp };
    return { ok: true, cp };
  }

  // eventsDigest is events_sha3_256 of an archive (§19).
  const eventsDigest = (records) => hashB64(records);

  Object.assign(ns, {
    b64u, b64uDecode, utf8, jcs, recordHash, verifyEnvelope, verifySignature, ed25519Available,
    ChainVerifier, verifyCheckpoint, eventsDigest,
  });
})(window.ADPViewer = window.ADPViewer || {});
