// SHA3-256 (FIPS 202) in plain JavaScript: WebCrypto has no SHA-3.
//
// The 1600-bit Keccak state is 25 lanes of 64 bits, each held as two 32-bit
// halves (lo, hi) in an Int32Array of 50. The round constants and rotation
// offsets are derived from their definitions in FIPS 202 §3.2 rather than
// typed in, so a typo cannot hide in a table.
(function (ns) {
  'use strict';

  // rc(t): the output bit of the degree-8 LFSR of FIPS 202 Algorithm 5.
  function rcBit(t) {
    t %= 255;
    if (t === 0) return 1;
    let r = 1;
    for (let i = 1; i <= t; i++) {
      r <<= 1;
      if (r & 0x100) r ^= 0x171; // feedback x^8 -> x^0, x^4, x^5, x^6
    }
    return r & 1;
  }

  // Round constants: bit 2^j - 1 of RC[i] is rc(j + 7i).
  const RC_LO = new Int32Array(24);
  const RC_HI = new Int32Array(24);
  for (let i = 0; i < 24; i++) {
    for (let j = 0; j <= 6; j++) {
      if (!rcBit(j + 7 * i)) continue;
      const bit = (1 << j) - 1;
      if (bit < 32) RC_LO[i] |= 1 << bit;
      else RC_HI[i] |= 1 << (bit - 32);
    }
  }

  // Rotation offsets (rho) and the pi permutation, per lane x + 5y.
  const ROT = new Int32Array(25);
  {
    let x = 1, y = 0;
    for (let t = 0; t < 24; t++) {
      ROT[x + 5 * y] = (((t + 1) * (t + 2)) / 2) % 64;
      const nx = y, ny = (2 * x + 3 * y) % 5;
      x = nx; y = ny;
    }
  }
  // pi: B[y, 2x + 3y] = A[x, y]; DEST[x + 5y] is the lane index in B.
  const DEST = new Int32Array(25);
  for (let x = 0; x < 5; x++) {
    for (let y = 0; y < 5; y++) DEST[x + 5 * y] = y + 5 * ((2 * x + 3 * y) % 5);
  }

  const C = new Int32Array(10);
  const B = new Int32Array(50);

  function keccakF(s) {
    for (let round = 0; round < 24; round++) {
      // theta
      for (let x = 0; x < 5; x++) {
        C[2 * x] = s[2 * x] ^ s[2 * x + 10] ^ s[2 * x + 20] ^ s[2 * x + 30] ^ s[2 * x + 40];
        C[2 * x + 1] = s[2 * x + 1] ^ s[2 * x + 11] ^ s[2 * x + 21] ^ s[2 * x + 31] ^ s[2 * x + 41];
      }
      for (let x = 0; x < 5; x++) {
        const p = (x + 4) % 5, n = (x + 1) % 5;
        // D[x] = C[x-1] ^ rotl(C[x+1], 1)
        const nlo = C[2 * n], nhi = C[2 * n + 1];
        const dlo = C[2 * p] ^ ((nlo << 1) | (nhi >>> 31));
        const dhi = C[2 * p + 1] ^ ((nhi << 1) | (nlo >>> 31));
        for (let y = 0; y < 25; y += 5) {
          s[2 * (x + y)] ^= dlo;
          s[2 * (x + y) + 1] ^= dhi;
        }
      }
      // rho and pi
      for (let i = 0; i < 25; i++) {
        const lo = s[2 * i], hi = s[2 * i + 1], r = ROT[i], d = 2 * DEST[i];
        if (r === 0) {
          B[d] = lo; B[d + 1] = hi;
        } else if (r < 32) {
          B[d] = (lo << r) | (hi >>> (32 - r));
          B[d + 1] = (hi << r) | (lo >>> (32 - r));
        } else if (r === 32) {
          B[d] = hi; B[d + 1] = lo;
        } else {
          const m = r - 32;
          B[d] = (hi << m) | (lo >>> (32 - m));
          B[d + 1] = (lo << m) | (hi >>> (32 - m));
        }
      }
      // chi
      for (let y = 0; y < 25; y += 5) {
        for (let x = 0; x < 5; x++) {
          const a = 2 * (x + y), b = 2 * (((x + 1) % 5) + y), c = 2 * (((x + 2) % 5) + y);
          s[a] = B[a] ^ (~B[b] & B[c]);
          s[a + 1] = B[a + 1] ^ (~B[b + 1] & B[c + 1]);
        }
      }
      // iota
      s[0] ^= RC_LO[round];
      s[1] ^= RC_HI[round];
    }
  }

  const RATE = 136; // bytes: 1600 - 2 * 256 bits

  // sha3_256 returns the 32-byte SHA3-256 digest of a Uint8Array.
  function sha3_256(msg) {
    const s = new Int32Array(50);
    const block = new Uint8Array(RATE);
    const absorb = () => {
      for (let i = 0; i < RATE / 4; i++) {
        s[i] ^= block[4 * i] | (block[4 * i + 1] << 8) | (block[4 * i + 2] << 16) | (block[4 * i + 3] << 24);
      }
      keccakF(s);
    };
    let off = 0;
    for (; off + RATE <= msg.length; off += RATE) {
      block.set(msg.subarray(off, off + RATE));
      absorb();
    }
    block.fill(0);
    block.set(msg.subarray(off));
    block[msg.length - off] ^= 0x06; // SHA-3 domain bits and pad10*1 start
    block[RATE - 1] ^= 0x80;
    absorb();
    const out = new Uint8Array(32);
    for (let i = 0; i < 8; i++) {
      const w = s[i];
      out[4 * i] = w & 0xff;
      out[4 * i + 1] = (w >>> 8) & 0xff;
      out[4 * i + 2] = (w >>> 16) & 0xff;
      out[4 * i + 3] = (w >>> 24) & 0xff;
    }
    return out;
  }

  ns.sha3_256 = sha3_256;
})(window.ADPViewer = window.ADPViewer || {});
