/**
 * onnxruntime's TensorRT execution provider through Nereid's onnxruntime engine, on the H200 (run by
 * scripts/gpu/ort-trt-check.sh after `tensorrt-on-device.sh core`). Each observation prints one line starting with
 * `OK`, `FAIL`, `INFO` or `SKIP`; onnxruntime's own (verbose) log goes to stderr, which the shell script greps.
 *
 *   tsnode scripts/gpu/ort-trt-check.ts --work DIR [--bert MODEL.onnx] [--section NAME] [--ms 3000]
 *   (child mode, used by the refusal section: --refuse   loads once and prints the error)
 */
import { configureKoffi } from '../../src/native/koffi.js';
import { spawnSync } from 'node:child_process';
import { copyFile, mkdir, readdir, rm, stat, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { missingProviderLibrary } from '../../src/backends/onnxruntime/capi/providers.js';
import { ortLibraryDir } from '../../src/backends/onnxruntime/capi/library.js';
import type { ModelConfig } from '../../src/config/model-config.js';
import type { Tensor } from '../../src/core/tensor.js';
import { ELEM, writeModel } from '../../test/fixtures/onnx-builder.js';
import { Collected, never, open, request, type Opened } from '../../test/helpers/capi-engine.js';
import { recordingLogger } from '../../test/helpers/recording-logger.js';

configureKoffi(); // before the first library any section loads (the library check dlopens TensorRT)
const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const work = arg('work') ?? '/tmp/ort-trt-work';
const bert = arg('bert');
const only = arg('section');
const benchMs = Number(arg('ms') ?? 3000);
const log = (line: string): void => console.log(line);
const seen = (ok: boolean, what: string): void => log(`${ok ? 'OK  ' : 'FAIL'} ${what}`);
const errLine = (e: unknown): string => `${(e as { code?: string }).code ?? 'ERROR'}: ${(e as Error).message}`;
const WIDTH = 256;

/** MLP 256-1024-256 with fixed pseudo-random weights: small enough to build in seconds, fp16 visibly differs. */
async function mlp(file: string): Promise<void> {
  let seed = 12345;
  const rand = (): number => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648 - 0.5) * 0.12;
  const w1 = Float32Array.from({ length: WIDTH * 1024 }, rand);
  const w2 = Float32Array.from({ length: 1024 * WIDTH }, rand);
  await writeModel(file, {
    inputs: [{ name: 'X', elemType: ELEM.FLOAT, dims: ['n', WIDTH] }],
    outputs: [{ name: 'Y', elemType: ELEM.FLOAT, dims: ['n', WIDTH] }],
    initializers: [
      { name: 'W1', elemType: ELEM.FLOAT, dims: [WIDTH, 1024], data: w1 },
      { name: 'W2', elemType: ELEM.FLOAT, dims: [1024, WIDTH], data: w2 },
    ],
    nodes: [
      { op: 'MatMul', inputs: ['X', 'W1'], outputs: ['h'] },
      { op: 'Relu', inputs: ['h'], outputs: ['r'] },
      { op: 'MatMul', inputs: ['r', 'W2'], outputs: ['Y'] },
    ],
  });
}

const X = (rows: number): Tensor => ({
  name: 'X',
  datatype: 'FP32',
  shape: [rows, WIDTH],
  data: Float32Array.from({ length: rows * WIDTH }, (_, i) => Math.sin(i * 0.37)),
});
/** One profile for the MLP: the engine is built at session creation, not at the first run. */
const MLP_PROFILE = {
  trt_profile_min_shapes: `X:1x${WIDTH}`,
  trt_profile_opt_shapes: `X:16x${WIDTH}`,
  trt_profile_max_shapes: `X:64x${WIDTH}`,
};

const trt = (parameters: Record<string, string>, extra: ModelConfig = {}): ModelConfig => ({
  max_batch_size: 64,
  ...extra,
  optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'tensorrt', parameters }] } },
});

async function run(m: Opened, inputs: Tensor[], outputs: string[]): Promise<Float32Array> {
  const r = new Collected();
  await m.instances[0].execute([request(inputs, outputs)], r, never());
  return r.response(0).outputs[0].data as Float32Array;
}

const maxDiff = (a: Float32Array, b: Float32Array): number => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
const maxAbs = (a: Float32Array): number => a.reduce((m, v) => Math.max(m, Math.abs(v)), 0);

/** Files of a folder with their sizes and mtimes (empty when it does not exist). */
async function files(dir: string): Promise<Map<string, { size: number; mtimeMs: number }>> {
  const out = new Map<string, { size: number; mtimeMs: number }>();
  for (const f of await readdir(dir).catch(() => [] as string[])) {
    const s = await stat(join(dir, f));
    if (s.isFile()) out.set(f, { size: s.size, mtimeMs: s.mtimeMs });
  }
  return out;
}
const listing = (m: Map<string, { size: number }>): string =>
  [...m].map(([f, s]) => `${f} (${(s.size / 1024).toFixed(0)} KiB)`).join(', ') || 'none';

async function section(name: string, body: () => Promise<void>): Promise<void> {
  if (only !== undefined && only !== name) return;
  log(`\n== ${name}`);
  console.error(`\n== ${name} (onnxruntime log follows)`);
  const t = performance.now();
  try {
    await body();
  } catch (e) {
    log(`FAIL section ${name} threw: ${errLine(e)}`);
  }
  log(`   (${((performance.now() - t) / 1000).toFixed(1)} s)`);
}

const model = join(work, 'repo', 'mlp', '1', 'model.onnx');

if (process.argv.includes('--refuse')) {
  // Child mode: one TensorRT load in the environment the parent gave; its outcome on stdout.
  try {
    const m = await open(model, trt({ ...MLP_PROFILE }), { kind: 'KIND_GPU', device: 0 });
    log('LOADED');
    await m.close();
  } catch (e) {
    log(`REFUSED ${errLine(e)}`);
  }
  process.exit(0);
}

await mkdir(join(work, 'repo', 'mlp', '1'), { recursive: true });
await mlp(model);

await section('libraries', async () => {
  const dir = ortLibraryDir();
  log(`   onnxruntime from ${dir}: ${(await readdir(dir)).join(' ')}`);
  const missing = missingProviderLibrary('tensorrt');
  seen(
    missing === undefined,
    `the TensorRT provider's libraries and libnvinfer.so.10 load (${missing ?? 'all present'})`,
  );
});

await section('refusals (child processes)', async () => {
  const child = (env: NodeJS.ProcessEnv): string => {
    const r = spawnSync(process.execPath, [...process.execArgv, process.argv[1], '--refuse', '--work', work], {
      env,
      encoding: 'utf8',
      timeout: 120_000,
    });
    return (
      r.stdout.split('\n').find((l) => /^(LOADED|REFUSED)/.test(l)) ?? `no answer (${r.status}) ${r.stderr.slice(-300)}`
    ).trim();
  };
  const ld = (process.env.LD_LIBRARY_PATH ?? '').split(':');
  const withoutTrt = ld.filter((d) => d !== '' && spawnSync('test', ['-e', join(d, 'libnvinfer.so.10')]).status !== 0);
  const a = child({ ...process.env, LD_LIBRARY_PATH: withoutTrt.join(':') });
  seen(/^REFUSED .*'libnvinfer\.so\.10' is missing/.test(a), `without TensorRT on LD_LIBRARY_PATH: ${a.slice(0, 400)}`);
  const noCuda = join(work, 'lib-no-cuda');
  await rm(noCuda, { recursive: true, force: true });
  await mkdir(noCuda);
  for (const f of await readdir(ortLibraryDir())) {
    if (f !== 'libonnxruntime_providers_cuda.so') await symlink(join(ortLibraryDir(), f), join(noCuda, f));
  }
  const b = child({ ...process.env, NEREID_ORT_LIB_DIR: noCuda });
  seen(
    /^REFUSED .*'libonnxruntime_providers_cuda\.so' is missing/.test(b),
    `without the CUDA provider library beside the TensorRT one: ${b.slice(0, 400)}`,
  );
});

await section('engine cache and timing cache: written on first load, reused on reload', async () => {
  const version = join(work, 'repo', 'mlp', '1');
  const cache = join(version, 'trt-cache');
  const timing = join(version, 'trt-timing');
  await rm(cache, { recursive: true, force: true });
  await rm(timing, { recursive: true, force: true });
  // Relative paths: Nereid takes them from the version folder (provider-paths.ts).
  const config = trt({
    ...MLP_PROFILE,
    trt_engine_cache_enable: '1',
    trt_engine_cache_path: 'trt-cache',
    trt_timing_cache_enable: '1',
    trt_timing_cache_path: 'trt-timing',
  });
  const load = async (): Promise<{ ms: number; y: Float32Array }> => {
    const t = performance.now();
    const m = await open(model, config, { kind: 'KIND_GPU', device: 0 });
    const y = await run(m, [X(16)], ['Y']);
    const ms = performance.now() - t;
    await m.close();
    return { ms, y };
  };
  const first = await load();
  const after1 = await files(cache);
  const timing1 = await files(timing);
  log(`   first load + run: ${first.ms.toFixed(0)} ms; ${cache}: ${listing(after1)}; ${timing}: ${listing(timing1)}`);
  seen(
    [...after1.keys()].some((f) => f.endsWith('.engine')),
    'an .engine file appeared in the relative trt_engine_cache_path (version folder)',
  );
  seen(
    [...timing1.keys()].some((f) => f.endsWith('.timing')),
    'a .timing file appeared in trt_timing_cache_path',
  );
  const second = await load();
  const after2 = await files(cache);
  log(`   second load + run: ${second.ms.toFixed(0)} ms (${(second.ms / first.ms).toFixed(2)} of the first)`);
  const same =
    after1.size > 0 &&
    after1.size === after2.size &&
    [...after1].every(([f, s]) => after2.get(f)?.mtimeMs === s.mtimeMs);
  seen(same, 'the reload reused the cache: same files, mtimes unchanged');
  seen(second.ms < first.ms, 'the reload was faster than the first load (no engine build)');
  seen(maxDiff(first.y, second.y) === 0, 'the cached engine answers exactly as the built one');
});

await section('precision_mode FP32 / FP16 against the CUDA provider (fp32)', async () => {
  const cuda = await open(model, { max_batch_size: 64 }, { kind: 'KIND_GPU', device: 0 });
  const ref = await run(cuda, [X(16)], ['Y']);
  await cuda.close();
  const scale = maxAbs(ref);
  const answers: Record<string, Float32Array> = {};
  for (const mode of ['FP32', 'FP16']) {
    const m = await open(model, trt({ ...MLP_PROFILE, precision_mode: mode }), { kind: 'KIND_GPU', device: 0 });
    answers[mode] = await run(m, [X(16)], ['Y']);
    await m.close();
    log(
      `   ${mode}: max |TensorRT - CUDA| = ${maxDiff(answers[mode], ref).toExponential(2)} (outputs up to ${scale.toFixed(3)})`,
    );
  }
  const d32 = maxDiff(answers.FP32, ref);
  const d16 = maxDiff(answers.FP16, ref);
  seen(d32 <= 1e-2 * scale, 'FP32 within TF32 tolerance of the CUDA provider (1e-2 of the output scale)');
  seen(d16 > d32 && d16 > 0, 'FP16 changes the answers (further from fp32 than FP32 is)');
  seen(d16 <= 3e-2 * scale, 'FP16 within fp16 tolerance (3e-2 of the output scale)');
  try {
    const m = await open(model, trt({ ...MLP_PROFILE, precision_mode: 'INT8' }), { kind: 'KIND_GPU', device: 0 });
    const y = await run(m, [X(16)], ['Y']);
    await m.close();
    log(`INFO INT8 without a calibration table loads; max diff ${maxDiff(y, ref).toExponential(2)}`);
  } catch (e) {
    log(`INFO INT8 without a calibration table: ${errLine(e)}`);
  }
});

await section('max_workspace_size_bytes and builder optimization level reach the provider', async () => {
  const workspace = '123456789';
  const logger = recordingLogger();
  const m = await open(
    model,
    trt({ ...MLP_PROFILE, max_workspace_size_bytes: workspace, trt_builder_optimization_level: '1' }),
    { kind: 'KIND_GPU', device: 0, logLevel: 'trace', logger },
  );
  await run(m, [X(4)], ['Y']);
  await m.close();
  const line = logger.entries.map((e) => e.msg).find((msg) => msg.startsWith('onnxruntime tensorrt provider options:'));
  log(`   ${line?.slice(0, 600) ?? 'no provider options line'}`);
  seen(
    new RegExp(`trt_max_workspace_size=${workspace}\\b`).test(line ?? ''),
    `trt_max_workspace_size=${workspace} read back from onnxruntime`,
  );
  seen(/trt_builder_optimization_level=1\b/.test(line ?? ''), 'trt_builder_optimization_level=1 read back');
  log(`INFO the EP's own line in the verbose log: grep 'trt_max_workspace_size: ${workspace}' (the shell script does)`);
  for (const level of ['0', '5']) {
    const t = performance.now();
    const l = await open(model, trt({ ...MLP_PROFILE, trt_builder_optimization_level: level }), {
      kind: 'KIND_GPU',
      device: 0,
    });
    log(`INFO trt_builder_optimization_level=${level}: built and loaded in ${(performance.now() - t).toFixed(0)} ms`);
    await l.close();
  }
});

await section('throughput: TensorRT provider next to the CUDA provider (same model, one run)', async () => {
  const useBert = bert !== undefined && (await stat(bert).catch(() => undefined)) !== undefined;
  if (!useBert) log('SKIP BERT-base (no --bert model): the MLP instead');
  const file = useBert ? join(work, 'repo', 'bert', '1', 'model.onnx') : model;
  if (useBert) {
    await mkdir(join(work, 'repo', 'bert', '1'), { recursive: true });
    await copyFile(bert, file);
  }
  const batch = 32;
  const seq = 128;
  const inputs: Tensor[] = useBert
    ? ['input_ids', 'attention_mask', 'token_type_ids'].map((name, k) => ({
        name,
        datatype: 'INT32',
        shape: [batch, seq],
        data: Int32Array.from({ length: batch * seq }, (_, i) => (k === 0 ? (i * 7919) % 30000 : k === 1 ? 1 : 0)),
      }))
    : [X(batch)];
  const outputs = [useBert ? 'output' : 'Y'];
  const shapes = (n: number): string =>
    useBert
      ? ['input_ids', 'attention_mask', 'token_type_ids'].map((x) => `${x}:${n}x${seq}`).join(',')
      : `X:${n}x${WIDTH}`;
  const profile = {
    trt_profile_min_shapes: shapes(1),
    trt_profile_opt_shapes: shapes(batch),
    trt_profile_max_shapes: shapes(64),
  };
  const cacheOf = (p: string): Record<string, string> => ({
    trt_engine_cache_enable: '1',
    trt_engine_cache_path: `bench-${p}`,
  });
  const variants: Array<[string, ModelConfig]> = [
    ['CUDA provider fp32', { max_batch_size: 64 }],
    ['TensorRT provider FP32', trt({ ...profile, ...cacheOf('fp32') })],
    ['TensorRT provider FP16', trt({ ...profile, ...cacheOf('fp16'), precision_mode: 'FP16' })],
  ];
  const rate: Record<string, number> = {};
  let ref: Float32Array | undefined;
  for (const [label, config] of variants) {
    const t0 = performance.now();
    const m = await open(file, config, { kind: 'KIND_GPU', device: 0 });
    const y = await run(m, inputs, outputs);
    const loadMs = performance.now() - t0;
    for (let i = 0; i < 10; i++) await run(m, inputs, outputs);
    let n = 0;
    const t = performance.now();
    while (performance.now() - t < benchMs) {
      await run(m, inputs, outputs);
      n++;
    }
    rate[label] = (n * batch * 1000) / (performance.now() - t);
    ref ??= y;
    log(
      `INFO ${label}: load + first run ${(loadMs / 1000).toFixed(1)} s; batch ${batch}: ${rate[label].toFixed(0)} ${useBert ? 'seq' : 'rows'}/s (concurrency 1, host I/O); max |y - CUDA| ${maxDiff(y, ref).toExponential(2)}`,
    );
    await m.close();
  }
  const cuda = rate['CUDA provider fp32'];
  log(
    `INFO TensorRT FP32 / CUDA: ${(rate['TensorRT provider FP32'] / cuda).toFixed(2)}; TensorRT FP16 / CUDA: ${(rate['TensorRT provider FP16'] / cuda).toFixed(2)}`,
  );
});

log('\ndone');
