import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runSoak } from './soak.js';

/**
 * The soak's short version (soak.ts runs the long one by hand): 16 rounds of mixed traffic against `nereid serve`
 * with a Python model and 2 front-end threads. The server runs with every GC a full one (--gc-global), so the live
 * JS heap after collection is read every round; no upward trend over the second half is asserted on it (a leak of a
 * kilobyte per request would show as 0.4 MiB per round), with a generous bound on RSS (which the allocator grows in
 * steps of its own). Counts and memory only: nothing here depends on how fast the machine is.
 */

describe('Soak (short): memory has no upward trend under mixed traffic', () => {
  it('keeps the live heap and RSS flat over the second half of 16 rounds, every answer right', async (t) => {
    const result = await runSoak({ rounds: 16, scale: 1, nodeArgs: ['--gc-global'] });
    const line = result.rounds.map((r) => `${r.serverMiB}/${r.heapMiB}`).join(' ');
    t.diagnostic(
      `RSS/live heap MiB per round: ${line}; slopes: RSS ${result.serverSlope.toFixed(2)}, heap ${result.heapSlope.toFixed(3)} MiB/round`,
    );
    assert.deepEqual(
      result.rounds.flatMap((r) => r.problems),
      [],
    );
    assert.equal(result.rounds.length, 16, 'every round ran (the server did not exit)');
    assert.ok(
      result.rounds.slice(8).every((r) => Number.isFinite(r.heapMiB)),
      'a full GC ran in each round',
    );
    assert.ok(result.heapSlope < 0.5, `live heap slope ${result.heapSlope} MiB/round`);
    assert.ok(result.serverSlope < 4, `RSS slope ${result.serverSlope} MiB/round`);
  });
});
