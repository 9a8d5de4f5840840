import type { Backend, BackendConfig } from '../backends/contract.js';
import type { RateLimitResource } from '../backends/runtime/rate-limiter.js';
import type { Logger } from '../core/logger.js';
import type { CudaRuntime, CudaUnavailable } from '../native/cudart.js';
import type { TraceOptions } from './trace.js';

/** What InferenceServer.create() takes; defaults are server/defaults.ts's SERVER_DEFAULTS (Triton's). */
export interface InferenceServerOptions {
  repositories: readonly string[];
  backends: readonly Backend[];
  /** Ids of the GPUs instances may use (KIND_GPU, KIND_AUTO); none by default. */
  gpus?: readonly number[];
  backendConfig?: ReadonlyMap<string, BackendConfig>;
  /** Triton's auto-complete (default on). */
  autoComplete?: boolean;
  /** Ready only when every model is ready (Triton's default true). */
  strictReadiness?: boolean;
  /** Fail start-up when a model fails to load (Triton's default true). */
  exitOnError?: boolean;
  /** Server name in metadata (`--id`). */
  id?: string;
  /** Triton's `--model-control-mode` (default none). */
  modelControlMode?: 'none' | 'poll' | 'explicit';
  /** `--load-model` names for explicit mode (`*` = all). */
  loadModels?: readonly string[];
  /** `--model-load-thread-count`: models loading at once (Triton's default 4). */
  modelLoadThreadCount?: number;
  /** `--model-config-name`: a model's `configs/<name>.pbtxt` is its config where it exists (else config.pbtxt). */
  modelConfigName?: string;
  /** `--model-load-retry-count`: how many times a failed load is tried again (Triton's default 0). */
  modelLoadRetryCount?: number;
  /** `--repository-poll-secs` (default 15). */
  repositoryPollSecs?: number;
  /** Trace settings from the command line (`--trace-config`). */
  trace?: TraceOptions;
  /** `--allow-client-shm`: clients may register shared-memory regions (default false, as Triton). */
  allowClientShm?: boolean;
  /**
   * Loads the CUDA runtime for CUDA shared memory (default: libcudart through koffi, at the first registration).
   * Tests on machines without a GPU pass a test double of the GPU boundary.
   */
  cudaRuntime?: () => CudaRuntime | CudaUnavailable;
  /** Bytes of the local response cache (`--cache-config=local,size=<bytes>`); none when absent. */
  responseCacheBytes?: number;
  /**
   * `--rate-limit` and `--rate-limit-resource` (Triton's rate limiter): with `execution_count`, instance groups'
   * `rate_limiter` resources and priorities decide which instances run; default off.
   */
  rateLimit?: { mode: 'off' | 'execution_count'; resources?: readonly RateLimitResource[] };
  /** `--allow-code-in-load-requests`: load requests may carry code (model.py, .pt, libraries); default false. */
  allowCodeInLoadRequests?: boolean;
  logger?: Logger;
}
