import type { ModelConfig } from '../config/model-config.js';
import type { InferRequest, InferResponse } from '../core/inference.js';
import type { ModelIndexEntry, ModelMetadata, ModelStatistics, ServerMetadata, TensorMetadata } from '../core/wire.js';

export type {
  ModelIndexEntry,
  ModelMetadata,
  ModelStatistics,
  ServerMetadata,
  StatDuration,
  TensorMetadata,
} from '../core/wire.js';

/** What every protocol (HTTP, gRPC) talks to. Validation and errors are computed here, once. */

export interface CallOptions {
  signal?: AbortSignal;
}

/**
 * A model version looked up for one request (by `checkModel`), handed back to `infer` so a request resolves its
 * model once. What protocols may read of it: enough to decode a raw binary body.
 */
export interface ResolvedModel {
  readonly name: string;
  readonly version: number;
  readonly maxBatchSize: number;
  readonly inputs: readonly TensorMetadata[];
  /** Decoupled (`model_transaction_policy`): any number of responses per request, so only streaming endpoints. */
  readonly decoupled: boolean;
  /**
   * Identity of the lookup: the same object while the same load of the same version would serve the request. Front-end
   * threads cache their lookups and learn from it that one went stale (src/frontend/host.ts).
   */
  readonly key?: object;
}

export interface InferOptions extends CallOptions {
  /** The lookup `checkModel` made for this request; `infer` reuses it while that version is still READY. */
  resolved?: ResolvedModel;
  /**
   * Decoupled models: every response as the model sends it; `infer` then resolves at the request's final flag
   * with no outputs. Required to call a decoupled model; not called for the others (their one response is
   * what `infer` resolves with). Return a promise while the response is not taken by the client's transport: the
   * model's `send()` then waits (backpressure) where its transport can make it (the process transport can).
   */
  onResponse?: (response: InferResponse) => void | Promise<void>;
  /**
   * The caller will release the response's `lease` once it has written the outputs: they may then view memory an
   * engine lends (a child process's shared-memory block) instead of being copied out for it. Only a caller that
   * releases on every path may set it; the server ignores it where the outputs are kept (cache, sequences).
   */
  views?: boolean;
  /** The caller will call the response's `onSent` when it has written it (Triton's `*_SEND_*` trace events). */
  reportsSend?: boolean;
}

export interface InferenceServerApi extends InferenceServerExtensions {
  isLive(): boolean;
  isReady(): boolean;
  metadata(): ServerMetadata;
  /** Throws NotFoundError for an unknown model/version, UnavailableError when not ready. */
  modelMetadata(name: string, version?: string): ModelMetadata;
  /** Never throws: unknown model → false. */
  modelReady(name: string, version?: string): boolean;
  modelConfig(name: string, version?: string): ModelConfig;
  /** Throws NotFoundError unless the model (and version) can take requests; lets protocols fail fast before parsing bodies. */
  checkModel(name: string, version?: string): ResolvedModel;
  /**
   * The request's tensor buffers are GIVEN: the caller must not read or reuse them afterwards (a front-end thread's
   * proxy transfers them to the main thread: src/frontend/wire.ts). The response's tensors are given to the caller.
   */
  infer(request: InferRequest, opts?: InferOptions): Promise<InferResponse>;
  close(): Promise<void>;
}

/** Load request overrides (Triton's model repository extension). */
export interface LoadOptions {
  /** JSON text of a ModelConfig that replaces config.pbtxt. */
  config?: string;
  /** `file:<version>/<path>` overrides: path (without the `file:` prefix) → content. */
  files?: ReadonlyMap<string, Uint8Array>;
}

/** Log settings (Triton's logging extension). */
export interface LogSettings {
  log_file: string;
  log_info: boolean;
  log_warning: boolean;
  log_error: boolean;
  log_verbose_level: number;
  log_format: string;
}

/** A system shared-memory region as the status calls list it (Triton's shape). */
export interface SystemSharedMemoryStatus {
  name: string;
  key: string;
  offset: number;
  byte_size: number;
}

/** A CUDA shared-memory region as the status calls list it. */
export interface CudaSharedMemoryStatus {
  name: string;
  device_id: number;
  byte_size: number;
}

/** Trace settings: every value a list of strings, as Triton's trace extension. */
export type TraceSettings = Record<string, string | string[]>;

/**
 * The model repository, statistics, logging and trace extensions. Methods whose feature is not built
 * yet throw UnsupportedError (HTTP 501, gRPC UNIMPLEMENTED) with a message saying so.
 */
export interface InferenceServerExtensions {
  repositoryIndex(opts?: { ready?: boolean }): ModelIndexEntry[];
  loadModel(name: string, opts?: LoadOptions & CallOptions): Promise<void>;
  unloadModel(name: string, opts?: { unloadDependents?: boolean } & CallOptions): Promise<void>;
  /** No name: every model; no version: every version of the model. Unknown model/version → NotFoundError. */
  modelStatistics(name?: string, version?: string): ModelStatistics[];
  logSettings(): LogSettings;
  updateLogSettings(update: Partial<Record<keyof LogSettings, unknown>>): LogSettings;
  traceSettings(model?: string): TraceSettings;
  updateTraceSettings(model: string | undefined, update: Record<string, unknown>): TraceSettings;
  /**
   * System shared memory: status (allowed when client shared memory is off), register and unregister (refused
   * UNSUPPORTED "Client shared memory is disabled ..." unless `--allow-client-shm`). No name: every region.
   */
  systemSharedMemoryStatus(name?: string): SystemSharedMemoryStatus[];
  /** Throws what a registration of `name` is refused for before its body is read (disabled, empty name). */
  checkSystemSharedMemoryRegister(name: string): void;
  registerSystemSharedMemory(name: string, key: string, offset: bigint, byteSize: bigint): void;
  unregisterSystemSharedMemory(name?: string): void;
  /**
   * CUDA shared memory (`raw_handle`: a 64-byte cudaIpcMemHandle_t). Gated like system shared memory; on a
   * machine where CUDA cannot be used, registration is INVALID_ARG "..., GPUs not supported" (Triton's words).
   */
  cudaSharedMemoryStatus(name?: string): CudaSharedMemoryStatus[];
  /** Throws what a registration of `name` is refused for before its body is read (disabled, empty name). */
  checkCudaSharedMemoryRegister(name: string): void;
  registerCudaSharedMemory(name: string, rawHandle: Uint8Array, deviceId: bigint, byteSize: bigint): void;
  unregisterCudaSharedMemory(name?: string): void;
}

/**
 * How a facade method crosses to the server when the caller runs in a front-end thread (src/frontend/): the one
 * list of the facade's methods that the thread's forwarding proxy and the main thread's host derive from, so a new
 * method is its declaration above, its implementation in server.ts, and one row here.
 * - `sync`: returns at once; the thread sleeps until the main thread answers (frontend/sync-call.ts).
 * - `async`: returns a promise and takes `CallOptions` last; its signal crosses as an id, the rest as data.
 * - `infer`: its own packed path (frontend/wire.ts), the one the throughput depends on.
 * - `local`: answered by the caller's side alone (a front end never closes the main thread's server).
 */
export type FacadeMethodKind = 'sync' | 'async' | 'infer' | 'local';

type Api = InferenceServerApi;
type IsPromise<T> = T extends PromiseLike<unknown> ? true : false;
type LastParameter<F> = F extends (...args: infer P) => unknown
  ? P extends [...unknown[], infer L]
    ? L
    : never
  : never;

/** The kind a row may give method `K`: a row that does not fit the method's signature does not compile. */
type Fits<K extends keyof Api, Kind> = Kind extends 'sync'
  ? IsPromise<ReturnType<Api[K]>> extends false
    ? Kind
    : never
  : Kind extends 'async'
    ? IsPromise<ReturnType<Api[K]>> extends true
      ? LastParameter<Api[K]> extends CallOptions | undefined
        ? Kind
        : never
      : never
    : Kind;

const FACADE_ROWS = {
  isLive: 'sync',
  isReady: 'sync',
  metadata: 'sync',
  modelMetadata: 'sync',
  modelReady: 'sync',
  modelConfig: 'sync',
  checkModel: 'sync',
  infer: 'infer',
  close: 'local',
  repositoryIndex: 'sync',
  loadModel: 'async',
  unloadModel: 'async',
  modelStatistics: 'sync',
  logSettings: 'sync',
  updateLogSettings: 'sync',
  traceSettings: 'sync',
  updateTraceSettings: 'sync',
  systemSharedMemoryStatus: 'sync',
  checkSystemSharedMemoryRegister: 'sync',
  registerSystemSharedMemory: 'sync',
  unregisterSystemSharedMemory: 'sync',
  cudaSharedMemoryStatus: 'sync',
  checkCudaSharedMemoryRegister: 'sync',
  registerCudaSharedMemory: 'sync',
  unregisterCudaSharedMemory: 'sync',
} as const satisfies Record<keyof Api, FacadeMethodKind>;

/** Every method of InferenceServerApi with its kind: a missing, extra or ill-fitting row is a type error. */
export const FACADE_METHODS: Readonly<{ [K in keyof Api]: Fits<K, (typeof FACADE_ROWS)[K]> }> =
  Object.freeze(FACADE_ROWS);

/** The facade methods of one kind. */
export type FacadeMethod<Kind extends FacadeMethodKind> = {
  [K in keyof Api]: (typeof FACADE_METHODS)[K] extends Kind ? K : never;
}[keyof Api];
