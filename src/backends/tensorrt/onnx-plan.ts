import { execFile } from 'node:child_process';
import { readFile, unlink } from 'node:fs/promises';
import { isAbsolute, normalize } from 'node:path';
import type { ModelConfig } from '../../config/model-config.js';
import { errorFromCompact, InvalidArgError, NereidError, UnavailableError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { externalDataLocations } from '../onnxruntime/external-data.js';
import { runBuilder, type ConvertSpec } from './builder.js';
import type { TensorRTEnvironment } from './environment.js';
import { hashOnnx, planKey, type PlanCache } from './plan-cache.js';
import { parseShapes } from './shapes.js';
import { refuseCachePaths } from './cache-params.js';

/**
 * A `model.onnx` served by the tensorrt backend: built at load into a plan with TensorRT's builder (the one
 * `nereid convert` runs), through the plan cache (plan-cache.ts), so that instances, GPUs of one model, reloads and
 * restarts build once. The build options come from the model config:
 * - profiles: one optimization profile; per input of the config, batch 1..max_batch_size (opt max_batch_size) in
 *   front of its dims; parameters `min_shapes`, `opt_shapes`, `max_shapes` (trtexec's `name:1x128,...`) give them
 *   instead, and are needed for any other dynamic dim;
 * - parameter `precision`: `fp32` (default), `fp16` or `bf16`; parameter `workspace_mib`: the builder's workspace.
 * The cache folder is the operator's; a parameter naming one is refused.
 */

export interface OnnxBuildOptions {
  shapes: ConvertSpec['shapes'];
  precision: ConvertSpec['precision'];
  workspace_mib?: number;
  batch?: { opt: number; max: number };
}

/** The model parameters the ONNX build reads. */
export const ONNX_BUILD_PARAMETERS = ['precision', 'workspace_mib', 'min_shapes', 'opt_shapes', 'max_shapes'];
const PRECISIONS = ['fp32', 'fp16', 'bf16'];

function param(config: ModelConfig, key: string): string | undefined {
  return config.parameters?.[key]?.string_value;
}

// Long: one pass over the parameters and the inputs, each check with its own message.
export function onnxBuildOptions(config: ModelConfig, where: string): OnnxBuildOptions {
  refuseCachePaths(config, where);
  const precision = param(config, 'precision') ?? 'fp32';
  if (!PRECISIONS.includes(precision)) {
    throw new InvalidArgError(`${where}: parameter precision is '${precision}'; expected fp32, fp16 or bf16`);
  }
  let workspace: number | undefined;
  const ws = param(config, 'workspace_mib');
  if (ws !== undefined) {
    workspace = Number(ws);
    if (!Number.isSafeInteger(workspace) || workspace <= 0) {
      throw new InvalidArgError(`${where}: parameter workspace_mib is '${ws}'; expected MiB > 0`);
    }
  }
  const hint = (k: string): Map<string, number[]> => {
    const raw = param(config, k);
    return raw === undefined ? new Map() : parseShapes(`${where}: parameter ${k}`, raw);
  };
  const [mins, opts, maxs] = [hint('min_shapes'), hint('opt_shapes'), hint('max_shapes')];
  const shapes: ConvertSpec['shapes'] = {};
  for (const name of new Set([...mins.keys(), ...opts.keys(), ...maxs.keys()])) {
    if (!mins.has(name) || !opts.has(name) || !maxs.has(name)) {
      throw new InvalidArgError(
        `${where}: input '${name}' needs all of parameters min_shapes, opt_shapes and max_shapes, or none`,
      );
    }
    shapes[name] = { min: mins.get(name) ?? [], opt: opts.get(name) ?? [], max: maxs.get(name) ?? [] };
  }
  const mbs = config.max_batch_size ?? 0;
  for (const input of config.input ?? []) {
    if (input.name === undefined || shapes[input.name] !== undefined) continue;
    const dims = (input.dims ?? []).map(Number);
    if (dims.some((d) => d < 0)) {
      throw new InvalidArgError(
        `${where}: input '${input.name}' has dynamic dims [${dims.join(',')}]: TensorRT builds for a range of shapes, so give it in parameters min_shapes, opt_shapes and max_shapes (e.g. ${input.name}:${[...(mbs > 0 ? ['1'] : []), ...dims.map((d) => (d < 0 ? 'N' : String(d)))].join('x')} with N filled in)`,
      );
    }
    if (mbs > 0) shapes[input.name] = { min: [1, ...dims], opt: [mbs, ...dims], max: [mbs, ...dims] };
  }
  return {
    shapes,
    precision: precision as OnnxBuildOptions['precision'],
    ...(workspace !== undefined ? { workspace_mib: workspace } : {}),
    ...(mbs > 0 ? { batch: { opt: mbs, max: mbs } } : {}),
  };
}

/** What a plan built here is tied to: TensorRT's version and the GPU (python .../tensorrt/buildinfo.py). */
export function buildInfo(
  env: TensorRTEnvironment,
  device: number,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<{ trtVersion: string; gpu: string }> {
  const args = ['-m', 'nereid_python.engines.tensorrt.buildinfo', '--device', String(device)];
  return new Promise((resolve, reject) => {
    execFile(env.executable, args, { env: env.env, timeout: timeoutMs, signal }, (err, stdout, stderr) => {
      let a: { trt_version?: string; device_name?: string; error?: { c: string; m: string } } | undefined;
      try {
        a = JSON.parse(stdout.trim().split('\n').pop() ?? '') as typeof a;
      } catch {
        a = undefined;
      }
      if (a?.trt_version !== undefined && a.device_name !== undefined) {
        resolve({ trtVersion: a.trt_version, gpu: a.device_name });
      } else if (a?.error) reject(errorFromCompact(a.error, 'TensorRT is not usable', 'UNAVAILABLE'));
      else {
        const tail = stderr.trim().split('\n').slice(-3).join(' | ');
        reject(new UnavailableError(`cannot ask ${env.executable} for TensorRT's version: ${err?.message ?? tail}`));
      }
    });
  });
}

/** External-data files the model names, each inside its folder (as onnxruntime loads are confined). */
async function externalFiles(onnx: string, where: string): Promise<string[]> {
  const names = externalDataLocations(await readFile(onnx));
  for (const n of names) {
    const rel = normalize(n);
    if (isAbsolute(rel) || rel === '..' || rel.startsWith('../')) {
      throw new InvalidArgError(`${where}: the ONNX model names external data '${n}' outside its folder`);
    }
  }
  return names;
}

export interface OnnxPlanRequest {
  onnx: string;
  where: string;
  options: OnnxBuildOptions;
  env: TensorRTEnvironment;
  cache: PlanCache;
  device: number;
  logger: Logger;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** The plan of an ONNX model: the cache's verified entry, or one built now (by this load, or another waited for). */
export async function planFromOnnx(r: OnnxPlanRequest): Promise<{ plan: string; key: string; built: boolean }> {
  const { logger, cache, where } = r;
  const onnxSha256 = await hashOnnx(r.onnx, await externalFiles(r.onnx, where));
  const info = await buildInfo(r.env, r.device, r.timeoutMs, r.signal);
  const key = planKey({ onnxSha256, trtVersion: info.trtVersion, gpu: info.gpu, build: { ...r.options } });
  const first = await cache.lookup(key, info);
  if (first.hit) {
    logger.info(`${where}: TensorRT plan from the cache (${first.plan}, built ${first.entry.built_at})`);
    return { plan: first.plan, key, built: false };
  }
  return cache.withLock(
    key,
    async () => {
      const again = await cache.lookup(key, info);
      if (again.hit) {
        logger.info(`${where}: TensorRT plan built meanwhile by another load, from the cache (${again.plan})`);
        return { plan: again.plan, key, built: false };
      }
      if (again.problem !== undefined) {
        logger.warn(`${where}: plan cache entry ${key} is not used: ${again.problem}; rebuilding it`);
      }
      await build(r, key, onnxSha256, info);
      return { plan: cache.planPath(key), key, built: true };
    },
    {
      signal: r.signal,
      onWait: (holder) => logger.info(`${where}: waiting for another build of the same TensorRT plan (lock ${holder})`),
    },
  );
}

async function build(
  r: OnnxPlanRequest,
  key: string,
  onnxSha256: string,
  info: { trtVersion: string; gpu: string },
): Promise<void> {
  const { logger, where } = r;
  const out = await r.cache.scratch(key);
  const started = process.hrtime.bigint();
  logger.info(
    { progress: 'building TensorRT plan' },
    `${where}: building a TensorRT ${info.trtVersion} plan from ${r.onnx} on ${info.gpu} (${r.options.precision}; cache entry ${key})`,
  );
  const spec: ConvertSpec = {
    onnx: r.onnx,
    output: out,
    int8: false,
    version_compatible: false,
    device: r.device,
    shapes_from: 'parameters min_shapes, opt_shapes and max_shapes (or declare the input in config.pbtxt)',
    ...r.options,
  };
  try {
    const onLine = (line: string): void => {
      const text = line.replace(/^\[convert\] /, '');
      logger.info({ progress: text }, `${where}: ${text}`);
    };
    await runBuilder(r.env, spec, onLine, r.signal);
  } catch (e) {
    await unlink(out).catch(() => undefined);
    const reason = e instanceof NereidError ? e.message : String(e);
    throw new UnavailableError(`${where}: TensorRT could not build a plan from ${r.onnx}: ${reason}`, { cause: e });
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  await r.cache.store(key, out, {
    trt_version: info.trtVersion,
    gpu: info.gpu,
    onnx_sha256: onnxSha256,
    build: { ...r.options },
    version_compatible: false,
    built_at: new Date().toISOString(),
    build_seconds: Math.round(seconds * 1000) / 1000,
  });
  logger.info(`${where}: built the TensorRT plan in ${seconds.toFixed(1)} s (cache entry ${key})`);
}
