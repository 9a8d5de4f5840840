/**
 * TensorRT scenario: a plan served by Nereid's tensorrt backend next to bare TensorRT (bench/peers/tensorrt_bare.py:
 * one context, pinned buffers, execute_async_v3) on the same GPU, batch B, closed loop, for S seconds each.
 * Runs whenever a plan is available (`--plan PATH` or $NEREID_BENCH_PLAN) and TensorRT imports; skips cleanly
 * (exit 0, one line saying why) otherwise, as on every machine of this project so far (no plan can be built for the
 * H200 from the packages reachable here). Nereid is driven at the backend boundary (instance.execute), which is
 * what a request reaches after the protocol and scheduler layers.
 *
 *   node --import tsx bench/tensorrt.ts [--plan P] [--batch 8] [--seconds 10] [--quick]
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { noopLogger } from '../src/core/logger.js';
import type { Tensor } from '../src/core/tensor.js';
import { DATATYPES } from '../src/core/datatypes.js';
import { tensorrtBackend } from '../src/backends/tensorrt/index.js';
import { resolveEnvironment } from '../src/backends/tensorrt/environment.js';
import { backendOptions } from '../src/backends/tensorrt/options.js';
import { finalizeConfig } from '../src/config/model-config.js';

const args = process.argv.slice(2);
const arg = (name: string, dflt: string | undefined): string | undefined => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const quick = args.includes('--quick');
const plan = arg('plan', process.env.NEREID_BENCH_PLAN);
const batch = Number(arg('batch', '8'));
const seconds = Number(arg('seconds', quick ? '3' : '10'));

function skip(why: string): never {
  process.stdout.write(`tensorrt scenario: skipped: ${why}\n`);
  process.exit(0);
}

if (plan === undefined || !existsSync(plan)) skip('no TensorRT plan (give --plan PATH or set NEREID_BENCH_PLAN)');
const env = resolveEnvironment(backendOptions({}));
let bare: { samples_per_s: number; p50_ms: number; p99_ms: number };
try {
  const out = execFileSync(
    env.executable,
    [
      join(import.meta.dirname, 'peers/tensorrt_bare.py'),
      '--plan',
      plan,
      '--batch',
      String(batch),
      '--seconds',
      String(seconds),
    ],
    {
      env: env.env,
      encoding: 'utf8',
    },
  );
  bare = JSON.parse(out.trim().split('\n').pop() ?? '{}') as typeof bare;
} catch (e) {
  skip(`bare TensorRT cannot run the plan: ${(e as Error).message.split('\n').slice(-2).join(' ')}`);
}

const backend = tensorrtBackend();
const dir = dirname(dirname(plan));
const name = basename(dir);
// Built apart from the call: the context gains `modelName` on main's contract; a variable passes on both.
const acx = { modelName: name, modelPath: plan, backendConfig: {}, autoComplete: true, logger: noopLogger };
const config = await backend.autoComplete({ name, backend: 'tensorrt' }, acx);
const handle = await backend.load({
  name,
  version: 1,
  config: finalizeConfig(config, name),
  modelDir: dir,
  modelPath: plan,
  backendConfig: {},
  logLevel: 'warn',
  logger: noopLogger,
});
const inst = await handle.createInstance({ name: `${name}_0`, index: 0, kind: 'KIND_GPU', device: 0, profiles: [] });
const inputs: Tensor[] = (config.input ?? []).map((i) => {
  const dt = Object.entries(DATATYPES).find(([, v]) => v.configName === i.data_type)![0] as keyof typeof DATATYPES;
  const dims = (i.dims ?? []).map((d) => (d < 0 ? 8 : d));
  const shape = (config.max_batch_size ?? 0) > 0 ? [batch, ...dims] : dims;
  const n = shape.reduce((a, b) => a * b, 1);
  const Ctor = DATATYPES[dt].array!;
  return { name: i.name ?? '', datatype: dt, shape, data: new Ctor(n) } as Tensor;
});
const outputs = (config.output ?? []).map((o) => o.name ?? '');
const lat: number[] = [];
const end = performance.now() + seconds * 1000;
const signal = new AbortController().signal;
while (performance.now() < end) {
  const t0 = performance.now();
  await inst.execute([{ inputs, outputs, batchSize: batch }], { send() {} }, signal);
  lat.push(performance.now() - t0);
}
lat.sort((a, b) => a - b);
const nereid = {
  samples_per_s: (lat.length * batch) / seconds,
  p50_ms: lat[lat.length >> 1],
  p99_ms: lat[Math.floor(lat.length * 0.99)],
};
await inst.destroy();
await handle.unload();
process.stdout.write(
  `tensorrt scenario (${plan}, batch ${batch}, ${seconds} s): bare TensorRT ${bare.samples_per_s.toFixed(0)} samples/s (p50 ${bare.p50_ms.toFixed(2)} ms), Nereid ${nereid.samples_per_s.toFixed(0)} samples/s (p50 ${nereid.p50_ms.toFixed(2)} ms): ratio ${(nereid.samples_per_s / bare.samples_per_s).toFixed(2)}\n`,
);
