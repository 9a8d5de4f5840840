import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { noopLogger } from '../../core/logger.js';
import type { EngineInstance, Instance, InstanceSpec } from '../contract.js';
import { EngineFault } from './fault.js';
import { inProcessBackend } from './inprocess.js';
import { InstancePool, type PoolHealth } from './pool.js';
import { finalizeConfig } from '../../config/model-config.js';

/** Test double of an engine instance whose execute faults on demand (a sticky engine error). */
class FaultyEngine implements EngineInstance {
  destroyed = 0;
  fault = false;
  async execute(): Promise<{ computeInputNs: number; computeInferNs: number; computeOutputNs: number }> {
    if (this.fault) throw new EngineFault('sticky engine error');
    return { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };
  }
  async destroy(): Promise<void> {
    this.destroyed++;
  }
}

const spec: InstanceSpec = { name: 'm_0', index: 0, kind: 'KIND_CPU', device: -1, profiles: [] };

async function pool(opts: { failCreate?: () => boolean } = {}) {
  const engines: FaultyEngine[] = [];
  const backend = inProcessBackend(
    {
      name: 'faulty',
      platforms: [],
      defaultModelFilename: '',
      datatypes: [],
      sections: [],
      kinds: ['KIND_CPU'],
      autoComplete: async (c) => c,
    },
    {
      load: async () => ({
        createInstance: async () => {
          if (opts.failCreate?.()) throw new Error('cannot create');
          const e = new FaultyEngine();
          engines.push(e);
          return e;
        },
        unload: async () => {},
      }),
    },
  );
  const handle = await backend.load({
    name: 'm',
    version: 1,
    config: finalizeConfig({}, 'm'),
    modelDir: '',
    modelPath: '',
    backendConfig: {},
    logLevel: 'silent',
    logger: noopLogger,
  });
  const p = await InstancePool.create(handle, [spec], {
    logger: noopLogger,
    restart: { initialMs: 20, maxMs: 200 },
  });
  const health: PoolHealth[] = [];
  p.on({ health: (h) => health.push(h) });
  return { p, engines, health };
}

const run = (i: Instance) => i.execute([], { send() {} }, new AbortController().signal);

describe('InstancePool', () => {
  it('FAULT - an engine fault takes the instance out, releases it, and a replacement serves after the backoff', async () => {
    const { p, engines, health } = await pool();
    const first = p.take() as Instance;
    engines[0].fault = true;
    await assert.rejects(run(first), EngineFault);
    p.give(first);
    await first.died;
    await sleep(0);
    assert.equal(p.idle, 0, 'the faulted instance left the rotation');
    assert.equal(engines[0].destroyed, 1, 'and was destroyed once');
    assert.deepEqual(health[0], { healthy: 0, total: 1, reason: 'instance m_0: sticky engine error; restarting' });
    await sleep(60);
    assert.equal(p.idle, 1);
    assert.deepEqual(health.at(-1), { healthy: 1, total: 1, reason: '' });
    await run(p.take() as Instance);
    await p.destroy();
  });

  it('FAULT - restarts that keep failing back off exponentially up to the cap', async () => {
    let creates = 0;
    let failing = false;
    const { p, engines } = await pool({ failCreate: () => (creates++, failing) });
    failing = true;
    engines[0].fault = true;
    const first = p.take() as Instance;
    await assert.rejects(run(first));
    const t0 = performance.now();
    await sleep(700);
    // 20, 40, 80, 160, 200, 200 ms: about 5 attempts in 0.7 s, not one per event-loop turn. The most the schedule
    // allows is counted for the time that really passed (a loaded machine oversleeps), plus one for slack.
    const attempts = creates - 1;
    const elapsed = performance.now() - t0;
    let allowed = 0;
    for (let at = 20, d = 20; at <= elapsed; d = Math.min(2 * d, 200), at += d) allowed++;
    assert.ok(attempts >= 3 && attempts <= allowed + 1, `${attempts} attempts in ${elapsed.toFixed(0)} ms`);
    failing = false;
    // The next attempt (at most 200 ms away) succeeds: waited for, not slept a fixed time a loaded machine overruns.
    for (let i = 0; i < 500 && p.health().healthy === 0; i++) await sleep(10);
    assert.equal(p.health().healthy, 1);
    await p.destroy();
  });

  it('destroy stops pending restarts and destroys live instances once', async () => {
    const { p, engines } = await pool();
    engines[0].fault = true;
    await assert.rejects(run(p.take() as Instance));
    await p.destroy();
    await sleep(60);
    assert.equal(engines.length, 1, 'no restart after destroy');
  });
});
