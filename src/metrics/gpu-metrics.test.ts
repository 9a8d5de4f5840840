import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import type { Logger } from '../core/logger.js';
import { noopLogger } from '../core/logger.js';
import { Nvml } from '../native/nvml.js';
import { loadNvmlApi } from '../native/nvml-koffi.js';
import { buildNvmlLibraryDouble, h200, nvmlDouble } from '../../test/helpers/nvml-double.js';
import { startGpuMetrics } from './gpu-metrics.js';
import { startMetricsServer } from './server.js';

const GPU_FAMILIES = [
  'nv_gpu_utilization',
  'nv_gpu_memory_total_bytes',
  'nv_gpu_memory_used_bytes',
  'nv_gpu_power_usage',
  'nv_gpu_power_limit',
  'nv_energy_consumption',
];

/** A logger that keeps every line, by level. */
function recordingLogger(): Logger & { lines: [string, string][] } {
  const lines: [string, string][] = [];
  const at =
    (level: string) =>
    (obj: object | string, msg?: string): void => {
      lines.push([level, typeof obj === 'string' ? obj : (msg ?? JSON.stringify(obj))]);
    };
  const l = {
    lines,
    error: at('error'),
    warn: at('warn'),
    info: at('info'),
    debug: at('debug'),
    trace: at('trace'),
    child: () => l,
    level: 'trace',
  };
  return l;
}

type Values = { labels: Record<string, string | number>; value: number }[];
async function family(registry: Registry, name: string): Promise<{ type: string; values: Values } | undefined> {
  const f = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return f ? { type: String(f.type), values: f.values as Values } : undefined;
}

describe('GPU metrics', () => {
  it('exports each family with the gpu_uuid label, read from NVML at scrape time', async () => {
    const { api, state } = nvmlDouble([h200(0), h200(1, { utilization: { gpu: 90, memory: 1 } })]);
    const registry = new Registry();
    const gpu = await startGpuMetrics(registry, 60_000, noopLogger, () => Nvml.open(api, {}));
    assert.ok(gpu);
    const util = await family(registry, 'nv_gpu_utilization');
    assert.deepEqual(util?.values, [
      { labels: { gpu_uuid: h200(0).uuid }, value: 0.37 },
      { labels: { gpu_uuid: h200(1).uuid }, value: 0.9 },
    ]);
    assert.equal((await family(registry, 'nv_gpu_memory_total_bytes'))?.values[0].value, 150_754_820_096);
    assert.equal((await family(registry, 'nv_gpu_memory_used_bytes'))?.values[0].value, 754_820_096);
    assert.equal((await family(registry, 'nv_gpu_power_usage'))?.values[0].value, 123.456);
    assert.equal((await family(registry, 'nv_gpu_power_limit'))?.values[0].value, 700);
    const energy = await family(registry, 'nv_energy_consumption');
    assert.equal(energy?.type, 'counter');
    assert.equal(energy?.values[0].value, 0, 'energy counts from start, not from driver load');
    await gpu.stop();
    assert.equal(state.shutdowns, 1);
    assert.equal(await family(registry, 'nv_gpu_utilization'), undefined, 'stop() removes the families');
  });

  it('reuses one reading within the interval and reads again after it', async () => {
    const { api, state } = nvmlDouble([h200(0)]);
    const registry = new Registry();
    const gpu = await startGpuMetrics(registry, 50, noopLogger, () => Nvml.open(api, {}));
    assert.ok(gpu);
    const reads = (): number => state.calls.filter((c) => c === 'deviceGetPowerUsage').length;
    const before = reads();
    await registry.metrics();
    await registry.metrics();
    assert.equal(reads(), before + 1, 'two scrapes within the interval read NVML once for all six families');
    state.gpus[0].energyMillijoules = 5_250_000n;
    state.gpus[0].powerMilliwatts = 300_000;
    await new Promise((r) => setTimeout(r, 60));
    assert.equal((await family(registry, 'nv_gpu_power_usage'))?.values[0].value, 300);
    assert.equal((await family(registry, 'nv_energy_consumption'))?.values[0].value, 250);
    await gpu.stop();
  });

  it('leaves a GPU out of a family it cannot report, logging it once', async () => {
    const { api } = nvmlDouble([h200(0), h200(1, { powerMilliwatts: undefined })]);
    const registry = new Registry();
    const logger = recordingLogger();
    const gpu = await startGpuMetrics(registry, 0, logger, () => Nvml.open(api, {}));
    assert.ok(gpu);
    await registry.metrics();
    await registry.metrics();
    const power = await family(registry, 'nv_gpu_power_usage');
    assert.deepEqual(
      power?.values.map((v) => v.labels.gpu_uuid),
      [h200(0).uuid],
    );
    const notes = logger.lines.filter(([, m]) => m.includes('power is not reported'));
    assert.deepEqual(notes, [['debug', `GPU ${h200(1).uuid}: power is not reported: Not Supported`]]);
    await gpu.stop();
  });

  it('registers nothing where NVML is unavailable, with one debug line and nothing louder', async () => {
    const registry = new Registry();
    const logger = recordingLogger();
    const gpu = await startGpuMetrics(registry, 1000, logger, async () => ({
      reason: 'no NVIDIA driver: libnvidia-ml.so.1 not found',
    }));
    assert.equal(gpu, undefined);
    assert.deepEqual(logger.lines, [['debug', 'GPU metrics are off: no NVIDIA driver: libnvidia-ml.so.1 not found']]);
    assert.equal((await registry.getMetricsAsJSON()).length, 0);
  });

  it('registers nothing when CUDA_VISIBLE_DEVICES hides every GPU', async () => {
    const { api, state } = nvmlDouble([h200(0)]);
    const registry = new Registry();
    const gpu = await startGpuMetrics(registry, 1000, noopLogger, () => Nvml.open(api, { CUDA_VISIBLE_DEVICES: '' }));
    assert.equal(gpu, undefined);
    assert.equal(state.shutdowns, 1, 'NVML is shut down again');
  });
});

describe('GPU metrics on the metrics endpoint', () => {
  it('has no GPU family on this machine (no NVIDIA driver), with --allow-gpu-metrics on', async (t) => {
    if ('init' in (await loadNvmlApi())) {
      t.skip('this machine has an NVIDIA driver');
      return;
    }
    const m = await startMetricsServer({ models: () => [] }, { port: 0, host: '127.0.0.1', allowGpuMetrics: true });
    try {
      const text = await (await fetch(`http://127.0.0.1:${m.port}/metrics`)).text();
      assert.ok(text.includes('nv_cpu_utilization'), 'the endpoint serves other families');
      for (const name of GPU_FAMILIES) assert.ok(!text.includes(name), `${name} is absent`);
    } finally {
      await m.close();
    }
  });

  it('serves the families through the real koffi binding over a C test double of libnvidia-ml.so.1', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'nereid-nvml-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    const lib = buildNvmlLibraryDouble(dir);
    if (!lib) {
      t.skip('no C compiler to build the NVML test double');
      return;
    }
    const api = await loadNvmlApi(lib);
    assert.ok('init' in api, JSON.stringify(api));
    const m = await startMetricsServer(
      { models: () => [] },
      { port: 0, host: '127.0.0.1', allowCpuMetrics: false, openNvml: () => Nvml.open(api, {}) },
    );
    try {
      const text = await (await fetch(`http://127.0.0.1:${m.port}/metrics`)).text();
      const gpu0 = 'gpu_uuid="GPU-d0b1e000-0000-0000-0000-000000000000"';
      const gpu1 = 'gpu_uuid="GPU-d0b1e000-0000-0000-0000-000000000001"';
      assert.ok(text.includes(`nv_gpu_utilization{${gpu0}} 0.42`), text);
      assert.ok(text.includes(`nv_gpu_utilization{${gpu1}} 0`), text);
      assert.ok(text.includes(`nv_gpu_memory_total_bytes{${gpu0}} 150754820096`), text);
      assert.ok(text.includes(`nv_gpu_memory_used_bytes{${gpu1}} 2097152`), text);
      assert.ok(text.includes(`nv_gpu_power_usage{${gpu0}} 123.456`), text);
      assert.ok(!text.includes(`nv_gpu_power_usage{${gpu1}}`), 'GPU 1 has no power sensor');
      assert.ok(text.includes(`nv_gpu_power_limit{${gpu1}} 700`), text);
      assert.ok(text.includes('# TYPE nv_energy_consumption counter'), text);
      // The double adds 1 J per read; start-up read once, this scrape once more.
      assert.ok(text.includes(`nv_energy_consumption{${gpu0}} 1`), text);
    } finally {
      await m.close();
    }
  });

  it('--allow-gpu-metrics=false opens no NVML at all', async () => {
    let opened = false;
    const m = await startMetricsServer(
      { models: () => [] },
      {
        port: 0,
        host: '127.0.0.1',
        allowCpuMetrics: false,
        allowGpuMetrics: false,
        openNvml: async () => {
          opened = true;
          return { reason: 'unused' };
        },
      },
    );
    await m.close();
    assert.equal(opened, false);
  });
});
