import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULT_RESTART_POLICY, RestartBackoff } from './restart-policy.js';

/** At `at` ms: the thing came up, or died / failed to start (then `delay` is what the policy must answer). */
type Step = { at: number; up: true } | { at: number; down: number };

const up = (at: number): Step => ({ at, up: true });
const down = (at: number, delay: number): Step => ({ at, down: delay });

const cases: { name: string; steps: Step[] }[] = [
  {
    name: 'delays double per consecutive death, starting at 100 ms',
    steps: [up(0), down(10, 100), up(110), down(120, 200), up(320), down(330, 400), up(730), down(740, 800)],
  },
  {
    name: 'failed starts advance the backoff like deaths (no up between them)',
    steps: [up(0), down(5, 100), down(105, 200), down(305, 400), down(705, 800)],
  },
  {
    name: 'the delay is capped at 30 s',
    steps: [
      up(0),
      ...[100, 200, 400, 800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000].map((d, i) => down(1 + i, d)),
    ],
  },
  {
    name: 'a life of 30 s or more resets the backoff',
    steps: [up(0), down(1, 100), up(101), down(102, 200), up(302), down(30_302, 100), up(30_402), down(30_403, 200)],
  },
  {
    name: 'a life just short of 30 s does not',
    steps: [up(0), down(1, 100), up(101), down(30_100, 200)],
  },
  {
    name: 'time spent failing to start is not a healthy life',
    steps: [up(0), down(1, 100), down(60_000, 200), down(120_000, 400)],
  },
  {
    name: 'the first death of a thing that never came up starts the backoff',
    steps: [down(50_000, 100), down(50_100, 200)],
  },
];

describe('RestartBackoff', () => {
  for (const c of cases) {
    it(c.name, () => {
      let now = 0;
      const b = new RestartBackoff({ now: () => now });
      const got = c.steps.map((s) => {
        now = s.at;
        if ('up' in s) return b.up();
        return b.next();
      });
      const want = c.steps.map((s) => ('up' in s ? undefined : s.down));
      assert.deepEqual(got, want);
    });
  }

  it('defaults to 100 ms doubling to 30 s, reset after 30 s (both pools)', () => {
    assert.deepEqual({ ...DEFAULT_RESTART_POLICY }, { initialMs: 100, maxMs: 30_000, stableMs: 30_000 });
  });

  it('takes its own delays', () => {
    let now = 0;
    const b = new RestartBackoff({ initialMs: 20, maxMs: 50, stableMs: 1000, now: () => now });
    assert.deepEqual([b.next(), b.next(), b.next()], [20, 40, 50]);
    b.up();
    now = 1000;
    assert.equal(b.next(), 20);
  });

  it('schedule runs the restart once after the delay; cancel drops it; a new schedule replaces the pending one', async () => {
    const b = new RestartBackoff({ initialMs: 5 });
    const ran: string[] = [];
    assert.equal(
      b.schedule(() => ran.push('a')),
      5,
    );
    b.cancel();
    b.schedule(() => ran.push('b'));
    b.schedule(() => ran.push('c'));
    await sleep(60);
    assert.deepEqual(ran, ['c']);
  });
});
