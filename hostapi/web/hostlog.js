// The host log in the browser (README, "Host log"): the C2SP signed-note
// checkpoint, its Ed25519 host signature and the witnesses' cosignature/v1
// lines (WebCrypto), and RFC 6962 inclusion proofs of record hashes
// (WebCrypto SHA-256), fetched in batches from POST /v1/log/inclusions.
//
// What is checked here, and against what:
// - the verifier key is discovery's log.verifier_key (an Ed25519 note key
//   whose key hash matches its name and key); the checkpoint's origin is
//   its name and one signature line by it verifies over the note text;
// - a witness line is verified when discovery's log.witnesses lists its
//   key (cosignature/v1 over "cosignature/v1\ntime T\n" + the text);
//   other lines are shown as not checked;
// - each proof leads from SHA-256(0x00 ‖ the record hash's 32 bytes) at
//   its leaf index to the checkpoint's root at the checkpoint's size;
// - the record hash itself is the one the chain verifier recomputed
//   (SHA3-256 over the record's JCS, verify.js): a record is marked
//   "in log" only when both hold.
(function (V) {
  'use strict';

  const { h, replace, api, fmtTime, fmtRel, shortHash, kv, utf8, b64uDecode } = V;

  // LOG_LIMITS bound the work of one page: proofs per request (the
  // server's cap), proofs per page, and the retries of records no
  // checkpoint covers yet.
  const LOG_LIMITS = { perRequest: 256, perPage: 1024, retryMs: 1500, maxRetries: 40 };

  const MAX_NOTE = 16 << 10;
  const MAX_SIGS = 100;
  const MAX_PROOF_HASHES = 128;
  const ALG_ED25519 = 1;
  const ALG_COSIGNATURE_V1 = 4;

  // b64Decode decodes canonical padded standard base64, or returns null.
  function b64Decode(s) {
    if (typeof s !== 'string' || s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return null;
    let bin;
    try {
      bin = atob(s);
    } catch (e) {
      return null;
    }
    const out = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    return b64Encode(out) === s ? out : null;
  }
  function b64Encode(bytes) {
    let s = '';
    for (const b of bytes) s += String.fromCharCode(b);
    return btoa(s);
  }

  function concat(...parts) {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let o = 0;
    for (const p of parts) {
      out.set(p, o);
      o += p.length;
    }
    return out;
  }

  const equal = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  const sha256 = async (bytes) => new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  const u32 = (b, o) => ((b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]) >>> 0;

  // parseVerifierKey parses a signed-note verifier key
  // "name+hex key hash+base64(alg ‖ 32-byte key)" and checks its key hash
  // (SHA-256(name ‖ "\n" ‖ alg ‖ key)[:4]). It returns {name, hash, alg,
  // pub} or throws.
  async function parseVerifierKey(vkey) {
    if (typeof vkey !== 'string') throw new Error('verifier key missing');
    const i = vkey.indexOf('+');
    const j = vkey.indexOf('+', i + 1);
    if (i <= 0 || j < 0) throw new Error('verifier key is malformed');
    const name = vkey.slice(0, i), hex = vkey.slice(i + 1, j), raw = b64Decode(vkey.slice(j + 1));
    if (!/^[0-9a-f]{8}$/.test(hex) || /\s/.test(name)) throw new Error('verifier key is malformed');
    if (!raw || raw.length !== 33) throw new Error('verifier key is not an Ed25519 key');
    const alg = raw[0], pub = raw.subarray(1);
    const id = u32(await sha256(concat(utf8(name), Uint8Array.of(0x0a, alg), pub)), 0);
    if (id !== parseInt(hex, 16)) throw new Error('verifier key hash does not match its name and key');
    return { name, hash: id, alg, pub };
  }

  // parseNote splits a signed note into its text and signature lines
  // ("— name base64"), as C2SP signed-note defines them.
  function parseNote(s) {
    if (typeof s !== 'string' || !s) throw new Error('no checkpoint');
    if (s.length > MAX_NOTE) throw new Error('checkpoint note is too large');
    const k = s.lastIndexOf('\n\n');
    if (k < 0 || !s.endsWith('\n')) throw new Error('checkpoint note is malformed');
    const text = s.slice(0, k + 1);
    if (/[\u0000-\u0009\u000b-\u001f\u007f]/.test(text)) throw new Error('checkpoint text has control characters');
    const sigs = [];
    for (const line of s.slice(k + 2, -1).split('\n')) {
      const m = /^\u2014 (\S+) ([A-Za-z0-9+/=]+)$/.exec(line);
      const bytes = m && b64Decode(m[2]);
      if (!bytes || bytes.length < 5) throw new Error('checkpoint signature line is malformed');
      sigs.push({ name: m[1], hash: u32(bytes, 0), bytes });
    }
    if (sigs.length > MAX_SIGS) throw new Error('checkpoint has too many signatures');
    return { text, sigs };
  }

  // parseCheckpoint parses a C2SP tlog-checkpoint body: origin, decimal
  // size, base64 root hash, optional extension lines.
  function parseCheckpoint(text) {
    const lines = text.slice(0, -1).split('\n');
    if (lines.length < 3 || !lines[0]) throw new Error('checkpoint body is malformed');
    if (!/^(0|[1-9][0-9]*)$/.test(lines[1])) throw new Error('checkpoint size is not a decimal number');
    const root = b64Decode(lines[2]);
    if (!root || root.length !== 32) throw new Error('checkpoint root is not 32 bytes of base64');
    const size = BigInt(lines[1]);
    if (size > 1n << 63n) throw new Error('checkpoint size is too large');
    return { origin: lines[0], size, sizeText: lines[1], root, rootB64: lines[2] };
  }

  function cosignedMessage(time, text) {
    return utf8('cosignature/v1\ntime ' + time.toString() + '\n' + text);
  }

  const cpCache = new Map(); // checkpoint note -> Promise(result), bounded

  // verifyCheckpointNote checks a signed checkpoint against the log's
  // verifier key and the listed witness keys. It returns {ok, reason, cp,
  // hostKey, sigs: [{role, name, state: ok|bad|unchecked, time, reason}]}.
  function verifyCheckpointNote(noteText, vkey, witnessKeys) {
    const key = vkey + '\n' + (witnessKeys || []).join('\n') + '\n' + noteText;
    if (!cpCache.has(key)) {
      if (cpCache.size >= 16) cpCache.delete(cpCache.keys().next().value);
      cpCache.set(key, checkNote(noteText, vkey, witnessKeys || []));
    }
    return cpCache.get(key);
  }

  async function checkNote(noteText, vkey, witnessKeys) {
    const out = { ok: false, reason: '', cp: null, hostKey: '', sigs: [] };
    let log, n;
    try {
      log = await parseVerifierKey(vkey);
      if (log.alg !== ALG_ED25519) throw new Error('the log key is not an Ed25519 note key');
      n = parseNote(noteText);
      out.cp = parseCheckpoint(n.text);
    } catch (e) {
      out.reason = e.message;
      return out;
    }
    out.hostKey = 'did:agent:' + V.b64u(log.pub);
    const witnesses = [];
    for (const w of witnessKeys) {
      try {
        const k = await parseVerifierKey(w);
        if (k.alg === ALG_COSIGNATURE_V1) witnesses.push(k);
      } catch (e) { /* a key that does not parse verifies nothing */ }
    }
    const text = utf8(n.text);
    let hostSigned = false;
    for (const s of n.sigs) {
      if (s.name === log.name && s.hash === log.hash) {
        const ok = s.bytes.length === 68 && (await V.verifySignature(log.pub, text, s.bytes.subarray(4)));
        out.sigs.push({ role: 'host', name: s.name, state: ok ? 'ok' : 'bad', reason: ok ? '' : 'Ed25519 signature does not verify' });
        hostSigned = hostSigned || ok;
        continue;
      }
      const w = witnesses.find((k) => k.name === s.name && k.hash === s.hash);
      const time = s.bytes.length === 76 ? new DataView(s.bytes.buffer, s.bytes.byteOffset + 4, 8).getBigUint64(0) : null;
      if (!w) {
        out.sigs.push({ role: 'witness', name: s.name, state: 'unchecked', time, reason: 'key not listed in discovery' });
        continue;
      }
      const ok = time !== null && (await V.verifySignature(w.pub, cosignedMessage(time, n.text), s.bytes.subarray(12)));
      out.sigs.push({ role: 'witness', name: s.name, state: ok ? 'ok' : 'bad', time, reason: ok ? '' : 'cosignature/v1 does not verify' });
    }
    if (!hostSigned) {
      out.reason = out.sigs.some((s) => s.role === 'host') ? 'the host signature does not verify' : 'the checkpoint is not signed by the log key';
    } else if (out.cp.origin !== log.name) {
      out.reason = 'the checkpoint origin is not the log\'s';
    } else {
      out.ok = true;
    }
    return out;
  }

  // verifyInclusion checks an RFC 6962 inclusion proof (RFC 9162
  // §2.1.3.2) of a record hash (base64url) against a verified checkpoint.
  // It returns null when it holds, or the reason it does not.
  async function verifyInclusion(recordHash, proof, cp) {
    const leaf = b64uDecode(recordHash);
    if (!leaf || leaf.length !== 32) return 'record hash is malformed';
    if (!proof || !Number.isSafeInteger(proof.leaf_index) || !Number.isSafeInteger(proof.tree_size) || !Array.isArray(proof.hashes)) return 'proof is malformed';
    if (BigInt(proof.tree_size) !== cp.size) return 'proof is for another tree size than the checkpoint';
    if (proof.hashes.length > MAX_PROOF_HASHES) return 'proof is too long';
    let fn = BigInt(proof.leaf_index), sn = cp.size - 1n;
    if (fn > sn) return 'leaf index is beyond the tree';
    let r = await sha256(concat(Uint8Array.of(0), leaf));
    for (const s of proof.hashes) {
      const p = b64Decode(s);
      if (!p || p.length !== 32) return 'proof hash is malformed';
      if (sn === 0n) return 'proof is longer than the path to the root';
      if ((fn & 1n) === 1n || fn === sn) {
        r = await sha256(concat(Uint8Array.of(1), p, r));
        if ((fn & 1n) === 0n) while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
      } else {
        r = await sha256(concat(Uint8Array.of(1), r, p));
      }
      fn >>= 1n;
      sn >>= 1n;
    }
    if (sn !== 0n) return 'proof is shorter than the path to the root';
    if (!equal(r, cp.root)) return 'proof does not lead to the checkpoint root';
    return null;
  }

  // verifyConsistency checks an RFC 6962 consistency proof (RFC 9162
  // §2.1.4.2) that the tree (size1, root1) is a prefix of (size2, root2);
  // sizes are BigInt. It returns null when it holds, or the reason.
  async function verifyConsistency(size1, root1, size2, root2, hashes) {
    if (!Array.isArray(hashes) || hashes.length > MAX_PROOF_HASHES) return 'consistency proof is malformed';
    const path = [];
    for (const s of hashes) {
      const p = b64Decode(s);
      if (!p || p.length !== 32) return 'consistency proof hash is malformed';
      path.push(p);
    }
    if (size1 > size2) return 'the first tree is larger than the second';
    if (size1 === size2) return path.length === 0 && equal(root1, root2) ? null : 'two checkpoints of one size with different roots';
    if (size1 === 0n) return path.length === 0 ? null : 'consistency proof from the empty tree is not empty';
    if (!path.length) return 'consistency proof is empty';
    if ((size1 & (size1 - 1n)) === 0n) path.unshift(root1);
    let fn = size1 - 1n, sn = size2 - 1n;
    while ((fn & 1n) === 1n) { fn >>= 1n; sn >>= 1n; }
    let fr = path[0], sr = path[0];
    for (const c of path.slice(1)) {
      if (sn === 0n) return 'consistency proof is too long';
      if ((fn & 1n) === 1n || fn === sn) {
        fr = await sha256(concat(Uint8Array.of(1), c, fr));
        sr = await sha256(concat(Uint8Array.of(1), c, sr));
        if ((fn & 1n) === 0n) while ((fn & 1n) === 0n && fn !== 0n) { fn >>= 1n; sn >>= 1n; }
      } else {
        sr = await sha256(concat(Uint8Array.of(1), sr, c));
      }
      fn >>= 1n;
      sn >>= 1n;
    }
    if (sn !== 0n) return 'consistency proof is too short';
    if (!equal(fr, root1)) return 'the proof does not reproduce the earlier root';
    if (!equal(sr, root2)) return 'the proof does not reproduce the later root';
    return null;
  }

  // merkleRoot returns the RFC 6962 root (base64url, as archive_root) over
  // record hashes (base64url) in order, or null if one is malformed.
  async function merkleRoot(recordHashes) {
    const stack = []; // perfect subtrees: [hash, leaves]
    for (const rh of recordHashes) {
      const leaf = b64uDecode(rh);
      if (!leaf || leaf.length !== 32) return null;
      let node = [await sha256(concat(Uint8Array.of(0), leaf)), 1];
      while (stack.length && stack[stack.length - 1][1] === node[1]) {
        const left = stack.pop();
        node = [await sha256(concat(Uint8Array.of(1), left[0], node[0])), left[1] * 2];
      }
      stack.push(node);
    }
    if (!stack.length) return V.b64u(await sha256(new Uint8Array(0)));
    let r = stack[stack.length - 1][0];
    for (let i = stack.length - 2; i >= 0; i--) r = await sha256(concat(Uint8Array.of(1), stack[i][0], r));
    return V.b64u(r);
  }

  // LogCheck proves a page's records in the host log: records are queued
  // with add(), asked for in batches (one POST per LOG_LIMITS.perRequest
  // records, at most LOG_LIMITS.perPage per page), and re-asked while no
  // checkpoint covers them yet. State: 'init', 'none' (no host log),
  // 'unsupported', 'ok', 'fail'.
  class LogCheck {
    constructor(onChange) {
      this.onChange = onChange || (() => {});
      this.state = 'init';
      this.reason = '';
      this.entries = new Map(); // seq -> {seq, hash, state: queued|asked|waiting|ok|fail|skipped, reason, tries}
      this.checkpoint = null; // latest verified checkpoint: checkNote's result + publishedAt
      this.requests = 0;
      this.proofs = 0;
      this.failed = 0;
      this.maxOk = 0; // highest seq whose proof verified
      this.timer = null;
      this.running = false;
      this.again = false;
      this.destroyed = false;
      this.consistency = null; // {from, to, reason}: the last consistency check between two checkpoints
      this.sizes = new Map(); // tree size -> root (base64) of every checkpoint seen: a second root is a fork
      this.disc = V.getDiscovery().then(async (d) => {
        const log = d && d.log;
        if (!log || !log.verifier_key) {
          this.state = 'none';
          this.reason = 'this host keeps no host log';
        } else if (!window.crypto || !crypto.subtle || !(await V.ed25519Available())) {
          this.state = 'unsupported';
          this.reason = 'this browser cannot verify Ed25519 here (WebCrypto needs https or localhost)';
        }
        this.onChange(this);
        return log || null;
      });
    }

    add(records) {
      for (const r of records) {
        if (!r || typeof r.seq !== 'number' || typeof r.hash !== 'string' || this.entries.has(r.seq)) continue;
        this.entries.set(r.seq, { seq: r.seq, hash: r.hash, state: 'queued', reason: '', tries: 0 });
      }
      // The page's first records are asked for at once; later ones (a live
      // room's) wait a checkpoint interval, so that a page sends at most
      // one request per LOG_LIMITS.retryMs however fast records arrive.
      this.schedule(this.requests ? LOG_LIMITS.retryMs : 150);
    }

    schedule(ms) {
      if (this.destroyed || this.timer) return;
      this.timer = setTimeout(() => {
        this.timer = null;
        this.flush();
      }, ms);
    }

    destroy() {
      this.destroyed = true;
      clearTimeout(this.timer);
    }

    // pick chooses the next batch: the newest record waiting (its proof
    // covers every earlier record through the verified hash chain), then
    // the oldest ones, within the page's budget.
    pick() {
      const due = [];
      for (const e of this.entries.values()) if (e.state === 'queued' || e.state === 'waiting') due.push(e);
      due.sort((a, b) => a.seq - b.seq);
      const room = Math.min(LOG_LIMITS.perRequest, LOG_LIMITS.perPage - this.proofs);
      if (room <= 0) {
        for (const e of due) Object.assign(e, { state: 'skipped', reason: `this page proves at most ${LOG_LIMITS.perPage} records` });
        return [];
      }
      if (due.length <= room) return due;
      return [due[due.length - 1], ...due.slice(0, room - 1)];
    }

    async flush() {
      if (this.destroyed) return;
      if (this.running) {
        this.again = true;
        return;
      }
      this.running = true;
      try {
        await this.round();
      } finally {
        this.running = false;
      }
      if (this.again) {
        this.again = false;
        this.schedule(0);
      } else if (Array.from(this.entries.values()).some((e) => e.state === 'waiting' || e.state === 'queued')) {
        this.schedule(LOG_LIMITS.retryMs);
      }
      this.onChange(this);
    }

    // idle reports that nothing is asked, due or scheduled.
    idle() {
      return !this.running && !this.timer;
    }

    async round() {
      const log = await this.disc;
      if (this.state === 'none' || this.state === 'unsupported' || !log) return;
      const batch = this.pick();
      if (!batch.length) {
        this.onChange(this);
        return;
      }
      for (const e of batch) e.state = 'asked';
      this.requests++;
      let res;
      try {
        res = await api('/v1/log/inclusions', {
          method: 'POST', headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
          body: JSON.stringify({ record_hashes: batch.map((e) => e.hash) }),
        });
      } catch (err) {
        for (const e of batch) this.retry(e, err.code === 'not_found' ? 'the host log has no checkpoint yet' : 'proofs unavailable: ' + err.message);
        this.onChange(this);
        return;
      }
      if (this.destroyed) return;
      const failAll = (reason) => {
        for (const e of batch) Object.assign(e, { state: 'fail', reason });
        this.failed += batch.length;
        this.state = 'fail';
        this.reason = reason;
        this.onChange(this);
      };
      if (!res || res.verifier_key !== log.verifier_key) return failAll('the answer names another log key than discovery');
      const c = await verifyCheckpointNote(res.checkpoint, log.verifier_key, log.witnesses);
      if (!c.ok) {
        this.checkpoint = Object.assign({}, c, { publishedAt: res.published_at });
        return failAll('checkpoint: ' + c.reason);
      }
      const seen = this.sizes.get(c.cp.sizeText);
      if (seen && seen !== c.cp.rootB64) return failAll('two checkpoints of size ' + c.cp.sizeText + ' with different roots (a fork)');
      if (this.sizes.size < 1024) this.sizes.set(c.cp.sizeText, c.cp.rootB64);
      const prev = this.checkpoint && this.checkpoint.ok ? this.checkpoint : null;
      if (prev && prev.cp.size !== c.cp.size) {
        // The page has seen two checkpoints: the smaller must be a prefix
        // of the larger (one request per new checkpoint).
        const [a, z] = prev.cp.size < c.cp.size ? [prev.cp, c.cp] : [c.cp, prev.cp];
        let p;
        try {
          p = await api('/v1/log/consistency?size1=' + a.sizeText + '&size2=' + z.sizeText);
        } catch (err) {
          // Not proved either way: the records stay unproved and are asked again.
          for (const e of batch) this.retry(e, 'no consistency proof between checkpoints ' + a.sizeText + ' and ' + z.sizeText + ' yet: ' + err.message);
          this.onChange(this);
          return;
        }
        const why = p && p.size1 === Number(a.size) && p.size2 === Number(z.size) ? await verifyConsistency(a.size, a.root, z.size, z.root, p.hashes) : 'the answer is for other sizes';
        this.consistency = { from: a.sizeText, to: z.sizeText, reason: why || '' };
        if (why) return failAll(`checkpoint ${z.sizeText} is not proved to extend checkpoint ${a.sizeText} seen before: ${why}`);
      }
      if (!prev || c.cp.size >= prev.cp.size) this.checkpoint = Object.assign({}, c, { publishedAt: res.published_at });
      const proofs = Array.isArray(res.proofs) ? res.proofs : [];
      for (let i = 0; i < batch.length; i++) {
        const e = batch[i], p = proofs[i];
        if (!p || p.record_hash !== e.hash) {
          Object.assign(e, { state: 'fail', reason: 'the answer has no proof for this record' });
          this.failed++;
          continue;
        }
        if (p.error === 'not_in_log') {
          this.retry(e, 'no checkpoint covers it yet');
          continue;
        }
        this.proofs++;
        const why = await verifyInclusion(e.hash, p.inclusion, c.cp);
        if (why) {
          Object.assign(e, { state: 'fail', reason: why, size: c.cp.sizeText });
          if (!this.failed) this.reason = why;
          this.failed++;
        } else {
          Object.assign(e, { state: 'ok', reason: '', size: c.cp.sizeText, index: p.inclusion.leaf_index });
          if (e.seq > this.maxOk) this.maxOk = e.seq;
        }
      }
      if (this.state !== 'fail') this.state = this.failed ? 'fail' : 'ok';
      if (this.failed && !this.reason) this.reason = 'a proof does not verify';
      this.onChange(this);
    }

    retry(e, reason) {
      e.tries++;
      Object.assign(e, e.tries > LOG_LIMITS.maxRetries ? { state: 'skipped', reason: reason + ' (gave up)' } : { state: 'waiting', reason });
    }

    // mark is what a record row shows: {state, text, title}. hashAt(seq)
    // is the record hash the chain verifier recomputed at seq.
    mark(seq, hashAt) {
      const e = this.entries.get(seq);
      if (!e || this.state === 'none') return null;
      if (this.state === 'unsupported') return { state: 'unsupported', text: '?', title: 'Not checked in the host log: ' + this.reason };
      const recomputed = hashAt(seq) === e.hash;
      if (e.state === 'fail') return { state: 'fail', text: '✗ log', title: 'Not proved in the host log: ' + e.reason };
      if (e.state === 'ok') {
        return recomputed ? { state: 'ok', text: '✓ log', title: `In the host log: leaf ${e.index}, inclusion proof verified here against the signed checkpoint of size ${e.size}` }
          : { state: 'pending', text: '… log', title: 'Proof verified; waiting for the record hash to be recomputed' };
      }
      const top = this.entries.get(this.maxOk);
      if (this.maxOk > seq && top && hashAt(this.maxOk) === top.hash && recomputed) {
        return { state: 'chain', text: '✓ log', title: `In the host log through #${this.maxOk}: its inclusion proof verified here, and its record hash commits to this record through the verified hash chain` };
      }
      if (e.state === 'waiting') return { state: 'waiting', text: '… log', title: 'Host log: ' + e.reason };
      if (e.state === 'skipped') return { state: 'skipped', text: '– log', title: 'Not checked in the host log: ' + e.reason };
      return { state: 'pending', text: '… log', title: 'Checking the host log…' };
    }

    // counts tallies the marks of every record added.
    counts(hashAt) {
      const n = { ok: 0, chain: 0, fail: 0, waiting: 0, skipped: 0, pending: 0, unsupported: 0 };
      for (const seq of this.entries.keys()) {
        const m = this.mark(seq, hashAt);
        if (m) n[m.state]++;
      }
      return n;
    }
  }

  // logCard renders the host log card: the checkpoint (origin, size, root,
  // age), its signatures, and the tally of the page's records.
  function logCard(lc, hashAt, what) {
    const el = h('section', { class: 'card log-card', data: { state: lc.state } }, h('h3', { text: 'Host log' }));
    el.refresh = () => {
      el.dataset.state = lc.state;
      el.dataset.idle = String(lc.idle());
      const c = lc.checkpoint;
      const parts = [h('h3', { text: 'Host log' })];
      if (lc.state === 'none' || lc.state === 'unsupported') {
        parts.push(h('p', { class: 'muted small', text: 'Not checked: ' + lc.reason + '.' }));
        replace(el, parts);
        return;
      }
      const n = lc.counts(hashAt);
      const total = lc.entries.size;
      const summary = h('p', { class: 'log-summary' + (n.fail ? ' bad' : '') },
        !total ? `No ${what} to prove yet.` : n.fail ? `✗ ${n.fail} of ${total} ${what} not proved: ${lc.reason}` :
          `${n.ok + n.chain === total && total ? '✓ ' : ''}${n.ok + n.chain} of ${total} ${what} proved in the log` +
          (n.chain ? ` (${n.ok} by their own proof, ${n.chain} through the hash chain)` : '') +
          (n.waiting ? ` · ${n.waiting} not in a checkpoint yet` : '') + (n.skipped ? ` · ${n.skipped} not checked (page limit)` : ''));
      summary.dataset.ok = String(n.ok);
      summary.dataset.chain = String(n.chain);
      summary.dataset.fail = String(n.fail);
      parts.push(summary);
      if (c && c.cp) {
        const sigs = h('ul', { class: 'log-sigs' });
        for (const s of c.sigs) {
          const icon = s.state === 'ok' ? '✓' : s.state === 'bad' ? '✗' : '?';
          const when = s.time !== null && s.time !== undefined ? ' · cosigned ' + fmtTime(Number(s.time) * 1000) : '';
          sigs.append(h('li', { class: 'log-sig', data: { role: s.role, state: s.state, name: s.name } },
            h('span', { class: s.state === 'ok' ? 'ok' : s.state === 'bad' ? 'bad' : 'muted', text: icon + ' ' }),
            h('span', { text: s.role === 'host' ? 'host ' : 'witness ' }), h('code', { text: s.name }),
            h('span', { class: 'muted small', text: (s.state === 'unchecked' ? ' · not checked: ' + s.reason : s.state === 'bad' ? ' · ' + s.reason : '') + when })));
        }
        if (!c.sigs.some((s) => s.role === 'witness')) sigs.append(h('li', { class: 'log-sig muted small', text: 'No witness has cosigned this checkpoint.' }));
        parts.push(h('dl', { class: 'kv' },
          kv('Checkpoint', c.ok ? h('span', { class: 'ok', text: '✓ signed by the host' }) : h('span', { class: 'bad', text: '✗ ' + c.reason })),
          kv('Origin', h('code', { class: 'log-origin', text: c.cp.origin })),
          kv('Size', h('span', { class: 'log-size', text: c.cp.sizeText })),
          kv('Root', h('code', { class: 'log-root', title: c.cp.rootB64, text: shortHash(c.cp.rootB64) })),
          lc.consistency ? kv('Consistency', h('span', { class: 'log-consistency ' + (lc.consistency.reason ? 'bad' : 'ok'), data: { state: lc.consistency.reason ? 'bad' : 'ok' },
            text: lc.consistency.reason ? `✗ size ${lc.consistency.to} does not extend size ${lc.consistency.from}: ${lc.consistency.reason}`
              : `✓ extends the checkpoint of size ${lc.consistency.from} seen earlier (RFC 6962 consistency proof checked here)` })) : null,
          kv('Published', c.publishedAt ? h('span', { title: fmtTime(c.publishedAt) + ' (the host\'s clock; not signed)', text: fmtRel(c.publishedAt) }) : '—'),
          c.hostKey ? kv('Host key', h('code', { class: 'did', text: c.hostKey })) : null),
        h('h4', { text: 'Signatures' }), sigs);
      } else if (lc.entries.size) {
        parts.push(h('p', { class: 'muted small', text: lc.requests ? 'No checkpoint yet.' : 'Fetching proofs…' }));
      }
      parts.push(h('p', { class: 'muted small log-note', text: 'Checked in this browser: the checkpoint\'s Ed25519 signature with discovery\'s log key, ' +
        'witness cosignatures whose keys discovery lists, and each record\'s RFC 6962 inclusion proof from SHA-256(0x00 ‖ record hash) to the ' +
        'signed root; the record hash is the one recomputed from the record (SHA3-256). ' + `At most ${LOG_LIMITS.perPage} proofs per page, ${LOG_LIMITS.perRequest} per request.` }));
      replace(el, parts);
    };
    el.refresh();
    return el;
  }

  // setMark shows a record's log mark in its row.
  function setMark(row, m) {
    if (!row) return;
    let el = row.querySelector(':scope > .rec-head > .log-mark') || row.querySelector(':scope > .log-mark');
    if (!m) {
      if (el) el.remove();
      return;
    }
    if (!el) {
      el = h('span', { class: 'log-mark' });
      (row.querySelector(':scope > .rec-head') || row).append(el);
    }
    if (el.dataset.state === m.state && el.title === m.title) return;
    el.dataset.state = m.state;
    el.textContent = m.text;
    el.title = m.title;
    row.classList.toggle('rec-log-bad', m.state === 'fail');
  }

  Object.assign(V, { verifyConsistency, merkleRoot, LOG_LIMITS, LogCheck, logCard, setMark, verifyInclusion, verifyCheckpointNote, parseVerifierKey, parseNote, b64Decode });
})(window.ADPViewer = window.ADPViewer || {});
