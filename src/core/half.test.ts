import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bf16BitsToFloat, floatToBf16Bits, floatToHalfBits, halfBitsToFloat } from './half.js';

describe('floatToHalfBits', () => {
  it('converts exact values', () => {
    assert.equal(floatToHalfBits(1), 0x3c00);
    assert.equal(floatToHalfBits(-2), 0xc000);
    assert.equal(floatToHalfBits(0.5), 0x3800);
    assert.equal(floatToHalfBits(65504), 0x7bff);
    assert.equal(floatToHalfBits(0), 0);
    assert.equal(floatToHalfBits(-0), 0x8000);
    assert.equal(floatToHalfBits(2 ** -24), 1);
  });

  it('rounds to nearest even', () => {
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even mantissa (1).
    assert.equal(floatToHalfBits(1 + 2 ** -11), 0x3c00);
    // 1 + 3 * 2^-11 is halfway between mantissa 1 and 2: ties to 2.
    assert.equal(floatToHalfBits(1 + 3 * 2 ** -11), 0x3c02);
    assert.equal(floatToHalfBits(1 + 2 ** -11 + 2 ** -20), 0x3c01);
    // Subnormal tie: 2^-25 is half the smallest subnormal → 0; 3 * 2^-25 → 2 (even).
    assert.equal(floatToHalfBits(2 ** -25), 0);
    assert.equal(floatToHalfBits(3 * 2 ** -25), 2);
  });

  it('overflows to infinity and keeps NaN', () => {
    assert.equal(floatToHalfBits(65520), 0x7c00);
    assert.equal(floatToHalfBits(-1e10), 0xfc00);
    assert.equal(floatToHalfBits(Infinity), 0x7c00);
    assert.ok(Number.isNaN(halfBitsToFloat(floatToHalfBits(NaN))));
  });

  it('round-trips every finite half', () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      if ((bits & 0x7c00) === 0x7c00) continue;
      assert.equal(floatToHalfBits(halfBitsToFloat(bits)), bits);
    }
  });
});

describe('floatToBf16Bits', () => {
  it('takes the top half of float32 with round-to-nearest-even', () => {
    assert.equal(floatToBf16Bits(1), 0x3f80);
    assert.equal(floatToBf16Bits(-2), 0xc000);
    assert.equal(floatToBf16Bits(1 + 2 ** -8), 0x3f80); // tie → even
    assert.equal(floatToBf16Bits(1 + 3 * 2 ** -8), 0x3f82); // tie → even
    assert.equal(bf16BitsToFloat(0x3fc0), 1.5);
    assert.equal(bf16BitsToFloat(0xbf80), -1);
    assert.equal(floatToBf16Bits(NaN) & 0x7fc0, 0x7fc0);
  });
});
