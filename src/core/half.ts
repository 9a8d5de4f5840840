/**
 * Float ↔ FP16 / BF16 bit conversions, shared by the server's JSON codec and the client. Triton refuses
 * FP16/BF16 in JSON; we accept numbers and round them here. Values are first rounded to float32 (Math.fround), then to half precision with
 * round-to-nearest-even; the double rounding can differ from a direct float64 → half rounding only on exact ties
 * below float32 precision, which JSON clients cannot meaningfully express.
 */

// One shared scratch word: conversions are synchronous, so sharing is safe on one thread.
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE binary16 bits of `value`, round-to-nearest-even; overflow → ±Infinity, NaN → quiet NaN. */
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
  // A carry out of the mantissa correctly bumps the exponent (up to Infinity).
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1) === 1)) h++;
  return sign | h;
}

/** The number an IEEE binary16 bit pattern stands for. */
export function halfBitsToFloat(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant !== 0 ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** bfloat16 bits of `value` (the top half of float32), round-to-nearest-even; NaN → quiet NaN. */
export function floatToBf16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0];
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return ((x >>> 16) & 0x8000) | 0x7fc0;
  // Plain arithmetic, not `>>>`, so the rounding carry cannot wrap past 32 bits.
  return Math.floor((x + 0x7fff + ((x >>> 16) & 1)) / 0x10000);
}

/** The number a bfloat16 bit pattern stands for. */
export function bf16BitsToFloat(bits: number): number {
  u32[0] = (bits & 0xffff) << 16;
  return f32[0];
}
