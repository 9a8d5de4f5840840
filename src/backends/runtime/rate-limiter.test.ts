import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InstanceRateLimit, InstanceSpec } from '../contract.js';
import { RateLimiter } from './rate-limiter.js';

const spec = (device: number, resources: InstanceRateLimit['resources'], priority = 0): InstanceSpec => ({
  name: `m_${device}`,
  index: 0,
  kind: device < 0 ? 'KIND_CPU' : 'KIND_GPU',
  device,
  profiles: [],
  rateLimiter: { resources, priority },
});
const r = (name: string, count: number, global = false) => ({ name, count, global });

describe('RateLimiter', () => {
  it("counts per device by default, and Triton's documented flags give each device its own copies", () => {
    // Triton's example: R1:10 everywhere, R2:5 on device 0 and 8 on device 1.
    const limiter = new RateLimiter([
      { name: 'R1', count: 10 },
      { name: 'R2', count: 5, device: 0 },
      { name: 'R2', count: 8, device: 1 },
    ]);
    const [on0, on1] = limiter.register([spec(0, [r('R2', 5)]), spec(1, [r('R2', 8)])]);
    assert.equal(limiter.tryAcquire(on0), true);
    assert.equal(limiter.tryAcquire(on1), true, 'device 1 has its own copies');
    assert.throws(
      () => limiter.register([spec(0, [r('R2', 6)])]),
      /Resource count for "R2" is limited to 5 which will prevent scheduling of one or more model instances, the minimum required count is 6/,
    );
  });

  it('a global resource is one pool for every device; CPU instances count against device 0', () => {
    const limiter = new RateLimiter();
    const [g0, g1, cpu, gpu0] = limiter.register([
      spec(0, [r('G', 1, true)]),
      spec(1, [r('G', 1, true)]),
      spec(-1, [r('D', 1)]),
      spec(0, [r('D', 1)]),
    ]);
    assert.equal(limiter.tryAcquire(g0), true);
    assert.equal(limiter.tryAcquire(g1), false, 'the one global copy is taken');
    assert.equal(limiter.tryAcquire(cpu), true);
    assert.equal(limiter.tryAcquire(gpu0), false, "device 0's one copy is the CPU instance's");
    limiter.release(g0);
    assert.equal(limiter.tryAcquire(g1), true);
  });

  it('without a flag, a resource has the largest count a loaded instance asks for, shrinking on unload', () => {
    const limiter = new RateLimiter();
    const [small] = limiter.register([spec(-1, [r('R', 1)])]);
    const big = limiter.register([spec(-1, [r('R', 3)])]);
    assert.equal(limiter.tryAcquire(small), true);
    assert.equal(limiter.canAcquire(big[0]), false, '1 of 3 in use');
    limiter.release(small);
    assert.equal(limiter.canAcquire(big[0]), true);
    limiter.unregister(big);
    assert.equal(limiter.tryAcquire(small), true);
    assert.equal(limiter.canAcquire(small), false, 'back to a count of 1');
  });

  it('orders by pass: priority 1 is granted twice as often as priority 2', () => {
    const limiter = new RateLimiter();
    const [high, low] = limiter.register([spec(-1, [r('R', 1)], 1), spec(-1, [r('R', 1)], 2)]);
    const order: string[] = [];
    for (let i = 0; i < 12; i++) {
      const next = limiter.rankOf(high) <= limiter.rankOf(low) ? high : low;
      assert.equal(limiter.tryAcquire(next), true);
      order.push(next === high ? 'H' : 'L');
      limiter.release(next);
    }
    assert.equal(order.filter((x) => x === 'H').length, 8, order.join(''));
  });
});
