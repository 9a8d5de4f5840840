/**
 * Number → FP16 / BF16 bits, for FP16/BF16 outputs a server returns as JSON numbers (the client hands every FP16/BF16
 * tensor out as a Uint16Array of raw bits). A copy of protocol/kserve/half.ts's rounding, because the client may import
 * only core/; round-to-nearest-even through float32.
 */

// One shared scratch word: conversions are synchronous, so sharing is safe on one thread.
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE binary16 bits of `value`; overflow → ±Infinity, NaN → quiet NaN. */
export function floatToHalfBits(value: number): number {
  f32[0] = value;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal half (or zero): shift the implicit-1 mantissa into place and round.
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (h & 1) === 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1) === 1)) h++;
  return sign | h;
}

/** bfloat16 bits of `value` (the top half of float32), round-to-nearest-even; NaN → quiet NaN. */
export function floatToBf16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0];
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return ((x >>> 16) & 0x8000) | 0x7fc0;
  return Math.floor((x + 0x7fff + ((x >>> 16) & 1)) / 0x10000);
}
