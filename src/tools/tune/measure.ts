/**
 * One measurement point of `nereid tune`: the closed loop of loop.ts, run on a load-generator thread of its own
 * (loadgen-thread.ts), with the GPU sampled here over its measured part. The load generator's own ceiling is
 * measured the same way against the health endpoint, so a point near it is marked as such.
 */
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { encodeInferRequest } from '../../client/http-codec.js';
import { toWireInput } from '../../client/tensors.js';
import type { GpuSampler } from './gpu.js';
import type { TuneRequest } from './inputs.js';
import type { LoopOptions, LoopResult, Prepared } from './loop.js';

export interface PointOptions extends LoopOptions {
  /** Samples GPU use over the measured part, when the candidates run on GPUs. */
  gpu?: GpuSampler;
  signal?: AbortSignal;
}

export interface PointResult extends LoopResult {
  /** Mean GPU utilization, 0–100, and peak GPU memory used (MiB), when sampled. */
  gpuPct?: number;
  gpuMemMiB?: number;
}

export function prepareInfer(model: string, requests: readonly TuneRequest[]): Prepared[] {
  return requests.map((inputs) => {
    const encoded = encodeInferRequest(inputs.map(toWireInput), { binary: true });
    return {
      path: `/v2/models/${encodeURIComponent(model)}/infer`,
      method: 'POST',
      body: encoded.body,
      headers: { ...encoded.headers, 'content-length': encoded.body.byteLength },
    };
  });
}

const HEALTH: Prepared = { path: '/v2/health/live', method: 'GET', headers: {} };

const ext = extname(fileURLToPath(import.meta.url));
const THREAD_URL = new URL(`./loadgen-thread${ext}`, import.meta.url);

/** The load-generator thread, with this module's extension (src/*.ts under tsx, dist/*.js after tsc). */
function spawnLoadThread(data: { prepared: readonly Prepared[]; options: LoopOptions }): Worker {
  const options = { workerData: data, name: 'nereid-tune-loadgen' };
  if (ext !== '.ts') return new Worker(THREAD_URL, options);
  // Under tsx the thread registers tsx's loader before importing its entry (as src/frontend/spawn.ts does).
  const api = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(THREAD_URL.href)}); })`;
  return new Worker(code, { ...options, eval: true });
}

/** Runs one point against `prepared` (round-robin) on a load-generator thread; the GPU is sampled here. */
export function measurePoint(prepared: readonly Prepared[], o: PointOptions): Promise<PointResult> {
  const { url, concurrency, warmupMs, maxMs, ciTarget } = o;
  const worker = spawnLoadThread({ prepared, options: { url, concurrency, warmupMs, maxMs, ciTarget } });
  let stopGpu: ReturnType<GpuSampler['start']> | undefined;
  const abort = (): void => worker.postMessage('stop');
  if (o.signal?.aborted) abort();
  else o.signal?.addEventListener('abort', abort, { once: true });
  let done = false;
  return new Promise<PointResult>((resolve, reject) => {
    const finish = (err: Error | undefined, r?: LoopResult): void => {
      if (done) return;
      done = true;
      o.signal?.removeEventListener('abort', abort);
      const gpu = stopGpu?.();
      stopGpu = undefined;
      void worker.terminate();
      if (err !== undefined) reject(err);
      else resolve({ ...r!, gpuPct: gpu?.utilPct, gpuMemMiB: gpu?.memUsedMiB });
    };
    worker.on('message', (m: { measuring?: true; result?: LoopResult; error?: string }) => {
      if (m.measuring) stopGpu = o.gpu?.start();
      else if (m.result !== undefined) finish(undefined, m.result);
      else finish(new Error(`load generator: ${m.error}`));
    });
    worker.on('error', (err) => finish(err));
    worker.on('exit', (code) => finish(new Error(`load generator thread exited (${code}) before its result`)));
  });
}

/** The load generator's ceiling at `concurrency`: requests/s it drives against the health endpoint. */
export function measureCeiling(o: PointOptions): Promise<PointResult> {
  return measurePoint([HEALTH], o);
}
