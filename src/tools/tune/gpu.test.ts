import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { h200, nvmlDouble } from '../../../test/helpers/nvml-double.js';
import { Nvml } from '../../native/nvml.js';
import { openGpuSampler } from './gpu.js';

describe('tune GPU sampler', () => {
  it('reports the mean utilization and the peak memory of the GPUs asked for', async () => {
    const gpus = [
      h200(0, { utilization: { gpu: 40, memory: 0 } }),
      h200(1, { utilization: { gpu: 90, memory: 0 }, memory: { total: 10n, free: 0n, used: 3n * 2n ** 30n } }),
    ];
    const { api, state } = nvmlDouble(gpus);
    const s = await openGpuSampler([0], () => Nvml.open(api, {}));
    assert.ok('start' in s, JSON.stringify(s));
    const stop = s.start();
    await sleep(250);
    const use = stop();
    assert.ok(use, 'samples came back');
    assert.equal(use.utilPct, 40, 'GPU 1 is not one of the candidates');
    assert.equal(Math.round(use.memUsedMiB), Math.round(754_820_096 / 2 ** 20));
    await s.close();
    assert.equal(state.shutdowns, 1);
  });

  it('says why there is none where NVML cannot be used, or the GPU asked for is not there', async () => {
    const none = await openGpuSampler(undefined, async () => ({
      reason: 'no NVIDIA driver: libnvidia-ml.so.1 not found',
    }));
    assert.deepEqual(none, { reason: 'no NVIDIA driver: libnvidia-ml.so.1 not found' });
    const { api } = nvmlDouble([h200(0)]);
    const missing = await openGpuSampler([3], () => Nvml.open(api, {}));
    assert.deepEqual(missing, { reason: 'none of GPUs 3 is visible to NVML' });
  });
});
