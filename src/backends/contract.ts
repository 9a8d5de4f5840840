import type { ModelConfig, NormalizedConfig } from '../config/model-config.js';
import type { DataType } from '../core/datatypes.js';
import type { DeviceMemory, RequestDeviceMemory } from '../core/device.js';
import type { Parameters, RequestTrace } from '../core/inference.js';
import type { Logger } from '../core/logger.js';
import type { Lease } from '../core/lease.js';
import type { Tensor } from '../core/tensor.js';

/**
 * The engine boundary, Triton's backend API in TypeScript. Two halves:
 *
 * - the **engine side** (`EngineAdapter` → `EngineModel` → `EngineInstance`) is what an engine implements: a few
 *   functions, with no idea where they run;
 * - the **host side** (`Backend` → `ModelHandle` → `Instance`) is what the repository and the schedulers use. A
 *   transport (`runtime/`) turns an adapter into a backend: in-process, a worker thread per instance, or a child
 *   process hosting one or more instances. The schedulers never know which.
 *
 * Memory ownership across `execute` (the rules every transport and engine keeps):
 * - request inputs are BORROWED by the engine: valid until `execute` settles. An engine that keeps input data
 *   after that (a decoupled model answering later, an implicit state) copies it. The host never mutates them.
 *   A transport may move them (transfer to a worker, write to shared memory); the caller must not use input
 *   buffers after handing them to `execute` (they may be detached).
 * - response outputs are GIVEN to the host by `send`: the engine must not touch their memory afterwards. Outputs of
 *   one batch may be views into one allocation (the batch's split); they stay valid as long as any view is held.
 * - device memory (client CUDA shared memory, core/device.ts): a request's tensors with `device` set, and the
 *   buffers of `device.outputs`, belong to the client's region, which the server holds until the response was
 *   made; the engine BORROWS them until `execute` settles and never frees them. Only an instance whose
 *   `deviceMemory` names that device gets them; the host hands every other instance host copies (inputs) and no
 *   output buffers (the server copies their host outputs into the region afterwards). An engine that wrote an
 *   output into its device buffer answers that tensor with `device` set and empty `data`.
 */

/** One tensor of a model file's signature, as the engine reports it. Dims: -1 for dynamic. */
export interface TensorSignature {
  name: string;
  datatype: DataType;
  dims: number[];
}

export interface ModelSignature {
  inputs: TensorSignature[];
  outputs: TensorSignature[];
}

/** Backend-wide settings from `--backend-config=<backend>,<key>=<value>`. */
export type BackendConfig = Readonly<Record<string, string>>;

/** One request of a batch handed to `execute`. */
export interface EngineRequest {
  /** Full shapes (batch dim included when the model batches). BORROWED: see the ownership rules above. */
  readonly inputs: readonly Tensor[];
  /** Output names to produce, in this order. */
  readonly outputs: readonly string[];
  /** Rows this request brings: its dim 0 when the model batches, else 1. */
  readonly batchSize: number;
  readonly id?: string;
  /** Sequence correlation id (sequence batcher), when the request has one. */
  readonly correlationId?: bigint | string;
  /** Triton's request flags, set by the sequence batcher: 1 = sequence START, 2 = sequence END. */
  readonly flags?: number;
  readonly parameters?: Readonly<Parameters>;
  /** Present when some input or requested output lives in device memory (see the ownership rules above). */
  readonly device?: RequestDeviceMemory;
  /**
   * The caller releases `EngineResponse.lease` once it no longer reads the outputs: the engine or its transport
   * may answer with outputs that view memory it lends (core/lease.ts) instead of copying them out. Unset: the
   * outputs must own their bytes.
   */
  readonly viewsOk?: boolean;
  /** A traced ensemble's context, which its steps carry on as their parent (server/trace.ts). */
  readonly trace?: RequestTrace;
}

/** One response to a request: exactly the outputs it asked for, in its order. GIVEN to the host. */
export interface EngineResponse {
  outputs: Tensor[];
  parameters?: Parameters;
  /** Set only for a request with `viewsOk`: the outputs view lent memory, given back by `release`. */
  lease?: Lease;
}

/**
 * How an engine answers the requests of a batch (Triton's response factory). A non-decoupled model sends exactly
 * one response with `final: true` per request; a decoupled model sends any number, then a final flag (with or
 * without a response: `null`). An error is final by itself. Sends after a request's final are ignored.
 * `sendTaken` is `send` that also says when the response's client took it (a promise while it has not: a stream
 * whose client does not read); a transport that can (the process transport: the model's sender blocks) holds the
 * engine's next sends of that request until then. Engines that use `send` stay correct; the protocol's stream
 * limits then bound memory.
 */
export interface Responder {
  send(index: number, response: EngineResponse | Error | null, opts: { final: boolean }): void;
  sendTaken?(index: number, response: EngineResponse | Error | null, opts: { final: boolean }): void | Promise<void>;
  /**
   * The engine released request `index` for rescheduling (Triton's TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
   * iterative sequences): it gets no final answer in this execution, and its scheduler runs it again in a later
   * batch. Ends the request's part in this execution as a final response would.
   */
  reschedule?(index: number): void;
}

/** Per-execution timings in nanoseconds, for the statistics extension. */
export interface ExecuteTimings {
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

export type InstanceKind = 'KIND_CPU' | 'KIND_GPU' | 'KIND_MODEL';

/** One entry of the expanded `instance_group`: what an instance is created for. */
export interface InstanceSpec {
  /** `<model>_<n>`, unique within a model version; used in logs and error messages. */
  readonly name: string;
  readonly index: number;
  readonly kind: InstanceKind;
  /** GPU id for KIND_GPU, -1 otherwise. */
  readonly device: number;
  /** `profile` of its instance group (TensorRT optimization profiles); empty = the engine's default. */
  readonly profiles: readonly string[];
  /** `rate_limiter` of its instance group (honoured with `--rate-limit=execution_count`). */
  readonly rateLimiter?: InstanceRateLimit;
}

/** An instance group's `rate_limiter`: the resources one execution holds, and its priority (a weight). */
export interface InstanceRateLimit {
  readonly resources: readonly { readonly name: string; readonly global: boolean; readonly count: number }[];
  readonly priority: number;
}

/**
 * `execute`'s signal aborts when every request of the batch has been cancelled (client gone, deadline) or the
 * instance is being destroyed. An engine that can stop early rejects with a CancelledError; one that cannot
 * finishes the run, and the host answers the cancelled requests CANCELLED anyway.
 *
 * `execute` resolves with the batch's timings once every request has had its final send; if it rejects, every
 * request without a final send gets the error. The host calls `execute` on one instance one batch at a time.
 */
export type Execute = (
  requests: readonly EngineRequest[],
  responder: Responder,
  signal: AbortSignal,
) => Promise<ExecuteTimings>;

/** Engine side: one execution context (Triton's model instance). */
export interface EngineInstance {
  execute: Execute;
  /**
   * An in-process engine that finds itself unusable (a sticky CUDA error) settles this with the cause; the host
   * then replaces the instance as if its thread had died. (Rejecting `execute` with an EngineFault does the same.)
   */
  readonly died?: Promise<Error>;
  /**
   * Device memory the engine reads inputs from and writes outputs into directly (onnxruntime's KIND_GPU instances:
   * their CUDA device; pytorch and python ones through the process transport). Absent: host memory only.
   */
  readonly deviceMemory?: DeviceMemory;
  /** Releases the instance. Called exactly once, after its last `execute` settled. */
  destroy(): Promise<void>;
}

/** Engine side: a model version loaded in one place (thread or process), able to create its instances. */
export interface EngineModel {
  createInstance(spec: InstanceSpec, signal: AbortSignal): Promise<EngineInstance>;
  /** Called exactly once, after every instance it created was destroyed. */
  unload(): Promise<void>;
}

/** What an engine learns about the model it loads. Plain data: it crosses to threads and processes. */
export interface EngineLoadContext {
  name: string;
  version: number;
  /** The final (auto-completed, validated) config, its defaults resolved. */
  config: Readonly<NormalizedConfig>;
  /** `<repo>/<model>` and the model file (or directory) inside `<version>/`. */
  modelDir: string;
  modelPath: string;
  backendConfig: BackendConfig;
  /** pino level name of the server's logger, for engines with their own logging (onnxruntime). */
  logLevel: string;
}

/** What `autoComplete` is given, engine side (plain data). */
export interface EngineAutoCompleteContext {
  modelName: string;
  /** The model file (or folder) of the latest selected version. */
  modelPath: string;
  backendConfig: BackendConfig;
  /** False with `--disable-auto-complete-config`: only check the config against the model. */
  autoComplete: boolean;
}

/** A config completed by an engine, with the warnings it has for the operator's log. */
export interface AutoCompleted {
  config: ModelConfig;
  warnings: string[];
}

/** Engine side: what an engine implements. Runs wherever its transport puts it. */
export interface EngineAdapter {
  /**
   * Triton's `auto_complete_config`: config in, completed config out (a Python model may set its inputs and its
   * batcher). Reads the model without creating instances. Absent: the config is used as it is.
   */
  autoComplete?(config: ModelConfig, ctx: EngineAutoCompleteContext): Promise<AutoCompleted>;
  load(ctx: EngineLoadContext, signal: AbortSignal): Promise<EngineModel>;
}

// ---------------------------------------------------------------------------------------------------------------
// Host side

/** Config sections a backend (or the schedulers) may support; anything else present in a config fails the load. */
export type ConfigSection =
  | 'sequence_batching'
  | 'ensemble_scheduling'
  | 'model_warmup'
  | 'response_cache'
  | 'decoupled'
  | 'batch_input'
  | 'batch_output'
  | 'model_repository_agents';

/**
 * What a backend reads besides its model file, checked for every backend the same way (backends/settings.ts).
 */
export interface BackendSettings {
  /** `--backend-config=<backend>,<key>=<value>` keys it reads (Triton's global ones are accepted for all). */
  readonly keys: readonly string[];
  /** Checks the values (its own parser, the one its loads use); throws INVALID_ARG naming the key. At start-up. */
  check?(cfg: BackendConfig): void;
  /** Model `parameters` keys it reads; absent: parameters are the model's own (python) and never checked. */
  readonly parameters?: readonly string[];
  /** Parameter keys Triton's backend reads that Nereid accepts with no effect, each with why. */
  readonly ignoredParameters?: Readonly<Record<string, string>>;
}

/** What the registry knows of a backend without loading anything. */
export interface BackendDescriptor {
  /** Backend name as in config `backend` (`onnxruntime`). */
  readonly name: string;
  /** Platform names it serves (`onnxruntime_onnx`). */
  readonly platforms: readonly string[];
  /** File name in a version folder; '' when the backend reads no file (the version folder itself). */
  readonly defaultModelFilename: string;
  /**
   * Files it loads instead when the default one is absent and the config names no `default_model_filename`, in
   * order (tensorrt: `model.onnx`, built into a plan at load).
   */
  readonly alternateModelFilenames?: readonly string[];
  /** Datatypes the engine can run; a config naming another is a load error. */
  readonly datatypes: readonly DataType[];
  /** Optional config sections this backend supports (beyond those every backend has). */
  readonly sections: readonly ConfigSection[];
  /** Instance kinds it can create, preferred first: KIND_AUTO is GPU when KIND_GPU comes first and a GPU exists. */
  readonly kinds: readonly InstanceKind[];
  /** `count` of a KIND_CPU group that sets none (Triton: 2 for onnxruntime, else 1). */
  readonly defaultCpuInstanceCount?: number;
  /** Its `--backend-config` keys and the model parameters it reads (absent: none of either is accepted). */
  readonly settings?: BackendSettings;
  /**
   * The engine runs its model file as code (a model.py, TorchScript, a TensorRT plan: a version-compatible one
   * carries host code): a load request carrying files for it carries code (server/code-trust.ts).
   */
  readonly executesModelFile?: boolean;
  /**
   * Paths a model file names beside itself (ONNX external data), relative to the file's folder, so that a load
   * request's files can be confined to the model folder (repository/confine.ts); undefined when `path` is not
   * this engine's model file. Throws INVALID_ARG for a file it cannot read.
   */
  referencedFiles?(path: string, content: Uint8Array, config: ModelConfig | undefined): string[] | undefined;
}

/** Everything `Backend.autoComplete` is given. */
export interface AutoCompleteContext extends EngineAutoCompleteContext {
  logger: Logger;
  signal?: AbortSignal;
}

/** Host side: one loaded model version, able to create instances (each in its transport's place). */
export interface ModelHandle {
  createInstance(spec: InstanceSpec, signal?: AbortSignal): Promise<Instance>;
  /** Releases what the model holds beyond its instances; idempotent. */
  unload(): Promise<void>;
}

/** Host side: an instance as the schedulers use it. */
export interface Instance {
  readonly name: string;
  readonly execute: Execute;
  /**
   * The engine's `deviceMemory`, where its transport can pass device memory: in-process (addresses) and the
   * process transport (client regions' CUDA IPC handles, opened by the child: runtime/process/device.ts).
   */
  readonly deviceMemory?: DeviceMemory;
  /** Destroys the instance after its in-flight batch; idempotent. */
  destroy(): Promise<void>;
  /**
   * Settles when the instance died on its own (its thread or process exited, a sticky engine error), with the
   * cause. In-flight requests were already failed with an INTERNAL error naming the instance. Never settles
   * for an instance destroyed on purpose.
   */
  readonly died: Promise<Error>;
}

/** Host side: a backend as the repository uses it. */
export interface Backend extends BackendDescriptor {
  /**
   * Triton's `auto_complete_config`: config in, completed config out. Reads the model file (or asks the engine:
   * a Python model sets its own inputs and batching). With `ctx.autoComplete` false it only checks.
   */
  autoComplete(config: ModelConfig, ctx: AutoCompleteContext): Promise<ModelConfig>;
  load(ctx: EngineLoadContext & { logger: Logger }, signal?: AbortSignal): Promise<ModelHandle>;
  /** Releases backend-wide resources (shared processes); idempotent. */
  close?(): Promise<void>;
}
