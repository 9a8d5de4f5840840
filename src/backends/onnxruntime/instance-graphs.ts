import type { GraphSpec } from '../../config/graph-spec.js';
import { DATATYPES } from '../../core/datatypes.js';
import { UnavailableError, UnsupportedError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { Tensor } from '../../core/tensor.js';
import { CudaGraphs, type PaddedBatch } from './capi/cuda-graphs.js';
import { CudaTensors } from './capi/device-tensors.js';
import { PrefaultedBuffers } from './capi/prefaulted.js';
import { loadCudaRuntime } from '../../native/cudart.js';
import type { InstanceSpec, TensorSignature } from '../contract.js';
import type { OrtRunner } from './capi/run.js';

/**
 * The CUDA graphs of a KIND_GPU instance: its graph slots (capi/cuda-graphs.ts), its engine thread's capture mode,
 * and the graphs captured at load for Triton's `optimization.cuda.graph_spec` (onnxruntime with the CUDA provider's
 * `enable_cuda_graph`): each spec's shapes run at load with zero inputs until onnxruntime has captured them, so no
 * request pays a learning run or a capture, and batches within a spec's `graph_lower_bound` replay that graph
 * padded (cuda-graphs.ts). Only the batch dimension is padded: a lower bound with other input dims than its spec's
 * is refused (padding a sequence length changes a model's answers unless it masks it).
 */

/** The graph runs of one spec at load: the learning run, onnxruntime's capture, one replay that checks it. */
const WARM_RUNS = 3;

/**
 * Attempts per spec. onnxruntime captures in CUDA's global mode: a thread that is not an engine thread (libuv's
 * pool creating another model's session, say) allocating on the GPU meanwhile breaks the capture, which
 * onnxruntime makes again on the next run. The device gate (device-gate.ts, gated.ts) keeps this server's own
 * loads and runs out of a load's captures; what it cannot see (another library's GPU work) lasts as long as a
 * load, so the warm-up retries after a pause before it gives up.
 */
const ATTEMPTS = 5;
const RETRY_PAUSE_MS = 200;

export interface GraphPlan {
  padded: PaddedBatch[];
  /** Per spec: zero inputs of its shapes, in the session's input order. */
  warm: Array<{ batchSize: number; inputs: Tensor[] }>;
}

/**
 * What each spec captures, from the session's inputs: the spec's dims for an input, else the model's own when
 * fixed. A spec that leaves a variable dim open is skipped with a warning (nothing to capture it for).
 */
export function planGraphs(
  specs: readonly GraphSpec[],
  inputs: readonly TensorSignature[],
  batching: boolean,
  where: string,
  logger: Logger,
): GraphPlan {
  const plan: GraphPlan = { padded: [], warm: [] };
  specs.forEach((spec, i) => {
    const w = `${where}: optimization.cuda.graph_spec[${i}]`;
    const dims = new Map<string, number[]>();
    for (const t of inputs) {
      const d = spec.inputs[t.name] ?? (batching ? t.dims.slice(1) : [...t.dims]);
      if (d.some((x) => x < 0) || DATATYPES[t.datatype].array === undefined) {
        logger.warn(
          `${w} is not captured: input '${t.name}' ${DATATYPES[t.datatype].array === undefined ? `is ${t.datatype}, which runs without a graph` : `has variable dims [${t.dims.join(',')}]; give them in graph_spec.input`}`,
        );
        return;
      }
      dims.set(t.name, d);
    }
    const lower = spec.lowerBound;
    if (lower !== undefined) {
      for (const [name, d] of Object.entries(lower.inputs)) {
        const own = dims.get(name);
        if (own === undefined || own.length !== d.length || own.some((x, k) => x !== d[k])) {
          throw new UnsupportedError(
            `${w}.graph_lower_bound: input '${name}' has other dims than the spec; Nereid pads only the batch dimension (give the spec's dims, or one spec per shape)`,
          );
        }
      }
    }
    const shape = (name: string): number[] => (batching ? [spec.batchSize, ...dims.get(name)!] : dims.get(name)!);
    plan.warm.push({
      batchSize: spec.batchSize,
      inputs: inputs.map((t) => {
        const s = shape(t.name);
        const Ctor = DATATYPES[t.datatype].array!;
        return { name: t.name, datatype: t.datatype, shape: s, data: new Ctor(s.reduce((a, b) => a * b, 1)) };
      }),
    });
    if (batching) plan.padded.push({ batchSize: spec.batchSize, lowerBound: lower?.batchSize ?? spec.batchSize, dims });
  });
  return plan;
}

/** Runs each spec's zero inputs until its graph is captured; a failure names the spec (the instance does not load). */
export async function warmUpGraphs(
  runner: OrtRunner,
  plan: GraphPlan,
  outputNames: readonly string[],
  where: string,
  logger: Logger,
): Promise<void> {
  if (plan.warm.length === 0) return;
  const t0 = process.hrtime.bigint();
  for (const w of plan.warm) {
    for (let attempt = 1; ; attempt++) {
      try {
        for (let i = 0; i < WARM_RUNS; i++) await runner.run(w.inputs, outputNames);
        break;
      } catch (err) {
        const message = (err as Error).message;
        if (attempt >= ATTEMPTS || !isCaptureCollision(message)) {
          throw new UnavailableError(
            `${where}: capturing the CUDA graph of graph_spec batch_size ${w.batchSize} failed${attempt > 1 ? ` (${attempt} attempts)` : ''}: ${message}`,
            { cause: err },
          );
        }
        logger.warn(
          { batchSize: w.batchSize, attempt },
          `${where}: a CUDA graph capture was broken by another thread's GPU work; retrying: ${message.slice(0, 200)}`,
        );
        await new Promise((r) => setTimeout(r, RETRY_PAUSE_MS * attempt));
      }
    }
  }
  logger.info(
    {
      batchSizes: plan.warm.map((w) => w.batchSize),
      padded: plan.padded.map((p) => `${p.lowerBound}-${p.batchSize}`),
      ms: Math.round(Number(process.hrtime.bigint() - t0) / 1e6),
    },
    `${where}: CUDA graphs captured at load for ${plan.warm.length} graph_spec(s)`,
  );
}

/** CUDA's errors for work that a concurrent stream capture prohibited or that broke one (cudaErrorStreamCapture*). */
export function isCaptureCollision(message: string): boolean {
  return /cudaErrorStreamCapture|when stream is capturing|during capture|CUDA failure 90[0-9]/.test(message);
}

/**
 * The CUDA graph slots of a KIND_GPU instance whose session replays graphs. Only on the engine-thread transport
 * (the backend puts such models there): the copies into the graphs' buffers run on the instance's own thread.
 */
export function cudaGraphsFor(spec: InstanceSpec, blocking: boolean, padded: readonly PaddedBatch[]): CudaGraphs {
  if (!blocking) {
    throw new UnsupportedError(
      `instance ${spec.name}: enable_cuda_graph runs on the engine-thread transport (--backend-config=onnxruntime,transport=thread)`,
    );
  }
  const cuda = loadCudaRuntime();
  if ('reason' in cuda) {
    throw new UnavailableError(`instance ${spec.name}: enable_cuda_graph needs the CUDA runtime: ${cuda.reason}`);
  }
  return new CudaGraphs(cuda, spec.device, new CudaTensors(spec.device), padded, new PrefaultedBuffers());
}

/**
 * An engine thread of a KIND_GPU instance (every run and copy of the instance comes from it) neither stops at nor
 * breaks another instance's CUDA graph capture (cudart.ts `ignoreOtherCaptures`). Without a CUDA runtime there is
 * nothing to capture: a no-op.
 */
export function ignoreOtherCaptures(): void {
  const cuda = loadCudaRuntime();
  if ('reason' in cuda) return;
  try {
    cuda.ignoreOtherCaptures();
  } catch {
    // No usable driver or device: the session's creation reports that, with the provider's own words.
  }
}
