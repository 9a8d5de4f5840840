import type { Tensor } from '../../../core/tensor.js';
import type { ExecuteTimings, TensorSignature } from '../../contract.js';
import type { Ptr } from './api.js';
import type { CudaTensors } from './device-tensors.js';
import type { CudaGraphs } from './cuda-graphs.js';
import type { OutputPool, PooledBuffer } from './output-pool.js';
import type { PrefaultedBuffers } from './prefaulted.js';

/** What an OrtRunner (run.ts) is made with, and what one run answers. */

export interface RunResult {
  outputs: Tensor[];
  timings: ExecuteTimings;
  /** The pooled buffer the host outputs are in: the caller's, to give back (OutputPool.give) once unread. */
  pooled?: PooledBuffer;
}

export interface RunnerOptions {
  /** AddRunConfigEntry pairs (memory.enable_memory_arena_shrinkage). */
  runConfig: ReadonlyArray<readonly [string, string]>;
  /** onnxruntime log severity for runs (0 verbose … 4 fatal). */
  logSeverity: number;
  /** KIND_GPU: OrtValues over the CUDA memory of the instance's device (device tensors of client CUDA shm). */
  device?: CudaTensors;
  /** The env's CPU memory info (inputs live there) and onnxruntime's default allocator (string tensors). */
  cpuMemoryInfo: Ptr;
  allocator: Ptr;
  tag: string;
  /**
   * Overridable initializers the config declares as (optional) inputs: graph inputs with a default in the file, which
   * onnxruntime does not list among the session's inputs but accepts as feeds by name.
   */
  overridable?: readonly TensorSignature[];
  /**
   * Call Run on the calling thread instead of libuv's pool: only for a thread of its own that does nothing else
   * (the engine-thread transport, `thread-adapter.ts`), where blocking is the point — every run of the instance then
   * comes from one thread (CUDA's per-thread state stays warm) with no pool hop. Never on the main thread.
   */
  blocking?: boolean;
  /** Runs measured short go inline on the calling thread, the rest to libuv's pool (inline-runs.ts): KIND_CPU. */
  inlineShortRuns?: boolean;
  /** KIND_GPU with `enable_cuda_graph` (engine-thread transport only): the session's graph slots (cuda-graphs.ts). */
  graphs?: CudaGraphs;
  /**
   * KIND_GPU: prefaulted memory for outputs copied to the host (prefaulted.ts), in power-of-two sizes from 1 MiB (a
   * batch's exact size varies; below that, page faults cost little). The runner closes it on release.
   */
  prefaulted?: PrefaultedBuffers;
  /** KIND_GPU in-process: page-locked output memory reused across runs (output-pool.ts); preferred to `prefaulted`. */
  outputPool?: OutputPool;
}
