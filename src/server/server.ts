import type { Backend, BackendConfig } from '../backends/contract.js';
import { BackendRegistry } from '../backends/registry.js';
import type { ModelConfig } from '../config/model-config.js';
import {
  AlreadyExistsError,
  InvalidArgError,
  NereidError,
  NotFoundError,
  UnavailableError,
  UnsupportedError,
} from '../core/errors.js';
import type { InferRequest, InferResponse, Parameters } from '../core/inference.js';
import { noopLogger, type Logger, type LogSwitches, type ServerLogger } from '../core/logger.js';
import type { FailureReason } from '../core/stats.js';
import type { Tensor } from '../core/tensor.js';
import type { ScheduledResult } from '../scheduler/scheduler.js';
import { ModelRepository } from '../repository/manager.js';
import { latestReady, type Model, type ModelVersion } from '../repository/model.js';
import type {
  CallOptions,
  CudaSharedMemoryStatus,
  InferenceServerApi,
  InferOptions,
  LoadOptions,
  LogSettings,
  ModelIndexEntry,
  ModelMetadata,
  ModelStatistics,
  ResolvedModel,
  ServerMetadata,
  SystemSharedMemoryStatus,
  TensorMetadata,
  TraceSettings,
} from './api.js';
import { noopObserver, type InferenceObserver } from '../metrics/observer.js';
import { applyLogSettings, readLogSettings } from './log-settings.js';
import { loadByRequest, unloadByRequest } from './model-control.js';
import { collectStatistics, repositoryIndexRows } from './statistics.js';
import { Tracer, type TraceOptions } from './trace.js';
import { SERVER_DEFAULTS } from './defaults.js';
import { sweepLeftovers } from './startup-sweep.js';
import { EXTENSIONS } from './extensions.js';
import { validateRequest } from './validate.js';
import { PathRedactor } from './redact.js';
import { bindSharedMemory, sliceSource, usesSharedMemory, type SliceSource } from './shm/bind.js';
import { CudaSharedMemory } from './shm/cuda.js';
import type { CudaRuntime, CudaUnavailable } from '../native/cudart.js';
import { SystemSharedMemory } from './shm/regions.js';
import { takeSequenceParams, type SequenceParams } from './sequence-params.js';
import { cacheKey, forgetLoad, ResponseCache, type CacheSlot } from './response-cache.js';
import type { StepRequest } from '../scheduler/ensemble/scheduler.js';
import { Target } from './target.js';

import { NEREID_VERSION } from '../core/version.js';

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
  /** `--allow-code-in-load-requests`: load requests may carry code (model.py, .pt, libraries); default false. */
  allowCodeInLoadRequests?: boolean;
  logger?: Logger;
}

/** The facade every protocol talks to: model lookup, request validation, scheduling, results. */
export class InferenceServer implements InferenceServerApi {
  readonly #repo: ModelRepository;
  readonly #opts: Required<Pick<InferenceServerOptions, 'strictReadiness' | 'id'>>;
  readonly #logger: Logger;
  readonly #mode: 'none' | 'poll' | 'explicit';
  readonly #allowCode: boolean;
  readonly #tracer: Tracer;
  /** Rewrites server paths in load errors and model reasons relative to their repository. */
  readonly #paths: PathRedactor;
  /** Client shared-memory regions (registered by clients, read and written by their requests). */
  readonly #shm: SystemSharedMemory;
  readonly #cudaShm: CudaSharedMemory;
  /** Both kinds as one namespace of region names, for requests. */
  readonly #slices: SliceSource;
  readonly #cache: ResponseCache | undefined;
  /** Versions already warned about a response too large for the cache (once each). */
  readonly #tooLarge = new WeakSet<ModelVersion>();
  /** Inference requests inside infer() now (for the shutdown countdown). */
  #inflight = 0;
  #observer: InferenceObserver = noopObserver;
  #draining = false;
  #poller: NodeJS.Timeout | undefined;
  #polling: Promise<unknown> | undefined;
  #closing: Promise<void> | undefined;
  #closed = false;

  private constructor(repo: ModelRepository, opts: InferenceServerOptions) {
    this.#repo = repo;
    this.#opts = {
      strictReadiness: opts.strictReadiness ?? SERVER_DEFAULTS.strictReadiness,
      id: opts.id ?? SERVER_DEFAULTS.id,
    };
    this.#logger = opts.logger ?? noopLogger;
    this.#mode = opts.modelControlMode ?? SERVER_DEFAULTS.modelControlMode;
    this.#allowCode = opts.allowCodeInLoadRequests === true;
    this.#tracer = new Tracer(opts.trace);
    this.#paths = new PathRedactor(opts.repositories);
    this.#shm = new SystemSharedMemory({ enabled: opts.allowClientShm ?? false });
    this.#cudaShm = new CudaSharedMemory({
      enabled: opts.allowClientShm ?? false,
      systemHas: (name) => this.#shm.status().some((r) => r.name === name),
      runtime: opts.cudaRuntime,
    });
    this.#slices = sliceSource(this.#shm, this.#cudaShm);
    this.#cache = opts.responseCacheBytes === undefined ? undefined : new ResponseCache(opts.responseCacheBytes);
  }

  /** Poll mode: rescans every `--repository-poll-secs`, from the end of the first load on. */
  #startPolling(opts: InferenceServerOptions): void {
    if (this.#mode !== 'poll') return;
    const secs = opts.repositoryPollSecs ?? SERVER_DEFAULTS.repositoryPollSecs;
    this.#poller = setInterval(() => void this.pollRepository(), Math.max(secs, 0.05) * 1000);
    this.#poller.unref();
  }

  /**
   * Poll mode's rescan (also run by tests): loads new models, reloads changed ones atomically, unloads removed
   * ones. One poll at a time; a poll already running is awaited instead of starting another.
   */
  pollRepository(): Promise<unknown> {
    if (this.#closing) return Promise.resolve();
    this.#polling ??= this.#repo
      .poll()
      .then((r) => {
        if (r.loaded.length + r.unloaded.length > 0) this.#logger.info(r, 'repository poll applied changes');
        return r;
      })
      .catch((err: unknown) => this.#logger.error({ err }, 'repository poll failed'))
      .finally(() => (this.#polling = undefined));
    return this.#polling;
  }

  /**
   * Loads the repositories and returns a server. With `exitOnError` (default) a model that fails to load
   * fails start-up with every reason; otherwise the failed models are UNAVAILABLE and the rest serve.
   */
  static async create(opts: InferenceServerOptions): Promise<InferenceServer> {
    const logger = opts.logger ?? noopLogger;
    await sweepLeftovers(logger);
    // Ensemble steps run through the server's own request path; the server exists before any model loads.
    const repo: ModelRepository = new ModelRepository({
      repositories: opts.repositories,
      registry: new BackendRegistry(opts.backends, { gpus: opts.gpus }),
      backendConfig: opts.backendConfig ?? new Map(),
      autoComplete: opts.autoComplete ?? SERVER_DEFAULTS.autoComplete,
      logger,
      runStep: (step, signal): Promise<Tensor[]> => server.#runStep(step, signal),
      responseCache: opts.responseCacheBytes !== undefined,
      onReplaced: (old) => server.#cache && forgetLoad(server.#cache, old, repo),
    });
    const server: InferenceServer = new InferenceServer(repo, opts);
    // Backends whose models call models (Python BLS) do it through infer(), like any client.
    for (const b of opts.backends) (b as { attachModelCaller?(c: InferenceServer): void }).attachModelCaller?.(server);
    const mode = opts.modelControlMode ?? SERVER_DEFAULTS.modelControlMode;
    if (mode === 'explicit') {
      await repo.scan();
      if ((opts.loadModels ?? []).length > 0) await repo.loadAll(opts.loadModels);
    } else {
      if ((opts.loadModels ?? []).length > 0) {
        throw new InvalidArgError('--load-model can only be used with --model-control-mode=explicit');
      }
      await repo.loadAll();
    }
    const failures = repo.failures();
    if (failures.length > 0 && (opts.exitOnError ?? SERVER_DEFAULTS.exitOnError)) {
      await repo.close();
      throw new UnavailableError(
        `failed to load ${failures.map((f) => `'${f.name}': ${f.reason}`).join('; ')} (start with --exit-on-error=false to serve the other models)`,
      );
    }
    server.#startPolling(opts);
    return server;
  }

  /** Live until the shutdown has finished (readiness turns false first). */
  isLive(): boolean {
    return !this.#closed;
  }

  isReady(): boolean {
    if (this.#draining || this.#closing !== undefined) return false;
    const models = this.#repo.list();
    // Explicit mode: models that were never loaded or were unloaded do not count against readiness.
    const counted = models.filter((m) => !(this.#mode === 'explicit' && m.reason === 'unloaded'));
    return this.#opts.strictReadiness ? counted.every((m) => m.state === 'READY') : true;
  }

  metadata(): ServerMetadata {
    return { name: this.#opts.id, version: NEREID_VERSION, extensions: [...EXTENSIONS] };
  }

  /** Model states for logs and the repository index. */
  models(): readonly Model[] {
    return this.#repo.list();
  }

  /** The one model lookup of a request: its model, the version asked for (or latest ready) and the spec. */
  #resolve(name: string, version?: string): Target {
    const model = this.#repo.get(name);
    if (!model || !model.spec) throw new NotFoundError(`Request for unknown model: '${name}' is not found`);
    let v: ModelVersion | undefined;
    if (version !== undefined && version !== '') {
      if (!/^[0-9]+$/.test(version)) {
        throw new InvalidArgError(`model version must be a non-negative integer, got '${version}'`);
      }
      v = model.versions.get(Number(version));
      if (!v) throw new NotFoundError(`Request for unknown model: '${name}' version ${version} is not found`);
      if (v.state !== 'READY') {
        const why = v.reason ? `: ${this.#paths.redact(v.reason)}` : '';
        throw new UnavailableError(
          `Request for unknown model: '${name}' version ${version} is not at ready state${why}`,
        );
      }
    } else {
      v = latestReady(model);
      // The repository has this model (its config resolved) but no version serves now (an instance restarting,
      // a composing model missing, a version that failed): UNAVAILABLE with the reason, never "not found".
      if (!v) {
        const why = model.reason ? this.#paths.redact(model.reason) : 'no version is ready';
        throw new UnavailableError(`model '${name}' is not available now: ${why}`);
      }
    }
    return new Target(model, v, model.spec);
  }

  checkModel(name: string, version?: string): ResolvedModel {
    return this.#resolve(name, version);
  }

  modelReady(name: string, version?: string): boolean {
    try {
      this.#resolve(name, version);
      return true;
    } catch {
      return false;
    }
  }

  modelMetadata(name: string, version?: string): ModelMetadata {
    const { model, spec } = this.#resolve(name, version);
    const meta = (t: {
      name: string;
      datatype: TensorMetadata['datatype'];
      fullDims: readonly number[];
    }): TensorMetadata => ({
      name: t.name,
      datatype: t.datatype,
      shape: [...t.fullDims],
    });
    const versions = [...model.versions.values()]
      .filter((v) => v.state === 'READY')
      .map((v) => v.version)
      .sort((a, b) => a - b)
      .map(String);
    return {
      name: model.name,
      versions,
      platform: spec.platform,
      inputs: [...spec.inputs.values()].map(meta),
      outputs: [...spec.outputs.values()].map(meta),
    };
  }

  modelConfig(name: string, version?: string): ModelConfig {
    return this.#resolve(name, version).spec.config as ModelConfig;
  }

  /** Per-request observations for latency summaries and histograms (the metrics endpoint sets it). */
  setObserver(observer: InferenceObserver): void {
    this.#observer = observer;
  }

  /** Requests being inferred now. */
  get inflight(): number {
    return this.#inflight;
  }

  /**
   * First step of a graceful shutdown: readiness turns false. Requests still arriving (on connections open before
   * the shutdown, as Triton serves them until its exit timeout) are served until close() begins.
   */
  beginShutdown(): void {
    this.#draining = true;
  }

  async infer(request: InferRequest, opts: InferOptions = {}): Promise<InferResponse> {
    if (this.#closing) throw new UnavailableError('server is shutting down');
    this.#inflight++;
    try {
      if (!usesSharedMemory(request)) return await this.#infer(request, opts);
      // Inputs read from, outputs written to the client's regions; the regions stay open until this request is done.
      const bound = await bindSharedMemory(this.#slices, request, {
        deviceTensors: this.#takesDeviceTensors(request, opts),
      });
      try {
        return bound.finish(await this.#infer(bound.request, opts));
      } finally {
        bound.release();
      }
    } finally {
      this.#inflight--;
    }
  }

  /**
   * Whether a request's CUDA slices may reach the scheduler as device tensors (the instance that runs it then
   * decides: its own device → zero copy, else a host copy; backends/device-placement.ts), or must be copied to host
   * memory at once: ensembles and sequence batchers copy and keep input data, the response cache hashes it, and a
   * decoupled model's responses are not written back to the region one by one. A model that cannot be resolved
   * answers its error later, in #infer.
   */
  #takesDeviceTensors(request: InferRequest, opts: InferOptions): boolean {
    let target: Target;
    try {
      const r = opts.resolved;
      target = r instanceof Target && r.fresh(request.model) ? r : this.#resolve(request.model, request.version);
    } catch {
      return false;
    }
    const { spec, versionEntry } = target;
    return (
      spec.sequence === undefined &&
      spec.ensemble === undefined &&
      versionEntry.stats.cache === undefined &&
      !target.decoupled
    );
  }

  async #infer(request: InferRequest, opts: InferOptions): Promise<InferResponse> {
    const requestStart = process.hrtime.bigint();
    const r = opts.resolved;
    const target = r instanceof Target && r.fresh(request.model) ? r : this.#resolve(request.model, request.version);
    const { sequence, rest } = takeSequenceParams(request.parameters);
    if (sequence !== undefined && target.spec.sequence === undefined && target.spec.ensemble === undefined) {
      throw new InvalidArgError(
        `inference request to model '${target.model.name}' has sequence parameters (sequence_id, sequence_start, sequence_end), but the model has no sequence_batching; send them only to sequence models`,
      );
    }
    return this.#run(target, request, opts, requestStart, sequence, rest);
  }

  /**
   * One ensemble step, as a request of its own to the step's model: validated, scheduled (batched), counted in
   * that model's statistics and metrics. The ensemble's sequence reaches only steps that are sequence models.
   */
  async #runStep(step: StepRequest, signal: AbortSignal | undefined): Promise<Tensor[]> {
    const requestStart = process.hrtime.bigint();
    const request: InferRequest = {
      model: step.step.model,
      version: step.step.version > 0 ? String(step.step.version) : undefined,
      inputs: step.inputs,
      outputs: step.outputs.map((name) => ({ name })),
      parameters: step.parameters,
    };
    const target = this.#resolve(request.model, request.version);
    const sequence =
      step.correlationId !== undefined && (target.spec.sequence !== undefined || target.spec.ensemble !== undefined)
        ? { correlationId: step.correlationId, start: step.sequence?.start ?? false, end: step.sequence?.end ?? false }
        : undefined;
    const response = await this.#run(target, request, { signal }, requestStart, sequence, step.parameters);
    return response.outputs;
  }

  async #run(
    target: Target,
    request: InferRequest,
    opts: InferOptions,
    requestStart: bigint,
    sequence: SequenceParams | undefined,
    parameters: Parameters | undefined,
  ): Promise<InferResponse> {
    const { model, versionEntry: version, spec } = target;
    const onResponse = target.decoupled ? opts.onResponse : undefined;
    if (target.decoupled && onResponse === undefined) {
      throw new UnsupportedError(
        `model '${model.name}' is decoupled and this endpoint doesn't support models with decoupled transaction policy; use gRPC ModelStreamInfer or HTTP POST /v2/models/${model.name}/generate_stream`,
      );
    }
    const checked = validateRequest(request, spec);
    const params = request.parameters ?? {};
    const scheduler = version.scheduler;
    if (!scheduler) throw new UnavailableError(`model '${model.name}' version ${version.version} is not ready`);
    let engineRequest = checked.request;
    if (sequence !== undefined || parameters !== request.parameters) {
      engineRequest = { ...engineRequest, correlationId: sequence?.correlationId, parameters };
    }
    const batchSize = checked.request.batchSize;
    const started = process.hrtime.bigint();
    // The key is taken before scheduling: the inputs may be moved to an engine thread.
    // Device tensors carry no host data to hash (#takesDeviceTensors keeps them from cached models anyway).
    const cache = version.stats.cache === undefined || engineRequest.device !== undefined ? undefined : this.#cache;
    // The slot belongs to this load of the version: a reload or unload forgets it (see ResponseCache).
    const slot = cache?.slot(version, cacheKey(model.name, version.version, engineRequest, parameters));
    const hit = slot === undefined ? undefined : cache?.lookup(slot);
    const lookupNs = slot === undefined ? 0 : Number(process.hrtime.bigint() - started);
    let result: ScheduledResult;
    if (hit !== undefined) {
      result = { outputs: [...hit], timings: NO_TIMINGS, queueNs: 0, executedBatchSize: batchSize };
      version.stats.recordCacheHit(Number(process.hrtime.bigint() - started), lookupNs);
      return target.respond(request, checked.outputs, result);
    }
    try {
      result = await scheduler.enqueue(engineRequest, {
        signal: opts.signal,
        priority: uintParam(params, 'priority'),
        timeoutUs: uintParam(params, 'timeout'),
        sequence: sequence && { start: sequence.start, end: sequence.end },
        onResponse: onResponse && ((r) => onResponse(target.respond(request, checked.outputs, r))),
      });
    } catch (err) {
      version.stats.recordFailure(Number(process.hrtime.bigint() - started), failureReason(err));
      throw err;
    }
    if (slot !== undefined && cache !== undefined) this.#remember(cache, slot, target, result, lookupNs);
    const totalNs = Number(process.hrtime.bigint() - started);
    version.stats.recordSuccess(batchSize, totalNs, result.queueNs, result.timings);
    this.#observer.requestSucceeded(model.name, version.version, {
      totalNs,
      queueNs: result.queueNs,
      ...result.timings,
    });
    const traceId = this.#tracer.sample(model.name);
    if (traceId !== 0) {
      this.#tracer.recordRequest(traceId, model.name, version.version, request.id, {
        requestStart,
        queueStart: started,
        queueNs: result.queueNs,
        timings: result.timings,
      });
    }
    // A decoupled request's responses went out through onResponse; what settles it is the final flag.
    return target.respond(request, checked.outputs, onResponse ? { outputs: [] } : result);
  }

  /** Stores a computed answer; a response larger than the whole cache is said once per version. */
  #remember(cache: ResponseCache, slot: CacheSlot, target: Target, result: ScheduledResult, lookupNs: number): void {
    const t = process.hrtime.bigint();
    const stored = cache.insert(slot, result.outputs);
    target.versionEntry.stats.recordCacheMiss(lookupNs + Number(process.hrtime.bigint() - t));
    if (stored === 'too_large' && !this.#tooLarge.has(target.versionEntry)) {
      this.#tooLarge.add(target.versionEntry);
      this.#logger.warn(
        { model: target.model.name, version: target.version },
        `a response of model '${target.model.name}' takes ${ResponseCache.sizeOf(slot.key, result.outputs)} bytes, more than the whole response cache (${cache.capacity} bytes): it is not cached; raise --cache-config=local,size=<bytes>`,
      );
    }
  }

  repositoryIndex(opts: { ready?: boolean } = {}): ModelIndexEntry[] {
    return repositoryIndexRows(this.#repo, opts.ready ?? false).map((r) =>
      r.reason === '' ? r : { ...r, reason: this.#paths.redact(r.reason) },
    );
  }

  #checkControl(action: string): void {
    if (this.#closing) throw new UnavailableError('server is shutting down');
    if (this.#mode === 'explicit') return;
    throw new UnavailableError(
      this.#mode === 'poll'
        ? `explicit model ${action} is not allowed if polling is enabled (--model-control-mode=poll)`
        : `explicit model ${action} is not allowed in model control mode 'none'; start with --model-control-mode=explicit`,
    );
  }

  async loadModel(rawName: string, opts: LoadOptions & CallOptions = {}): Promise<void> {
    this.#checkControl('load');
    let name: string;
    try {
      name = await loadByRequest(this.#repo, rawName, { ...opts, allowCode: this.#allowCode });
    } catch (err) {
      throw this.#paths.redactError(err);
    }
    this.#logger.info({ model: name }, `successfully loaded '${name}'`);
  }

  async unloadModel(rawName: string, opts: { unloadDependents?: boolean } & CallOptions = {}): Promise<void> {
    this.#checkControl('unload');
    let name: string;
    try {
      name = await unloadByRequest(this.#repo, rawName, opts.signal, opts.unloadDependents ?? false);
    } catch (err) {
      throw this.#paths.redactError(err);
    }
    this.#logger.info({ model: name }, `successfully unloaded '${name}'`);
  }

  modelStatistics(name?: string, version?: string): ModelStatistics[] {
    return collectStatistics(this.#repo, name, version);
  }

  logSettings(): LogSettings {
    return readLogSettings(this.#switches());
  }

  updateLogSettings(update: Partial<Record<keyof LogSettings, unknown>>): LogSettings {
    applyLogSettings(this.#switches(), update);
    return this.logSettings();
  }

  #switches(): LogSwitches {
    const s = (this.#logger as Partial<ServerLogger>).switches;
    if (!s)
      throw new UnsupportedError('the logging extension needs a server logger (start the server through serve())');
    return s;
  }

  traceSettings(model?: string): TraceSettings {
    if (model !== undefined) this.#resolve(model);
    return this.#tracer.settings(model);
  }

  updateTraceSettings(model: string | undefined, update: Record<string, unknown>): TraceSettings {
    if (model !== undefined) this.#resolve(model);
    return this.#tracer.update(model, update);
  }

  systemSharedMemoryStatus(name?: string): SystemSharedMemoryStatus[] {
    return this.#shm.status(name);
  }

  checkSystemSharedMemoryRegister(name: string): void {
    this.#shm.checkRegister(name);
  }

  registerSystemSharedMemory(name: string, key: string, offset: bigint, byteSize: bigint): void {
    // One namespace for both kinds, as Triton's manager.
    if (this.#cudaShm.status().some((r) => r.name === name)) {
      throw new AlreadyExistsError(`shared memory region '${name}' already in manager`);
    }
    this.#shm.register(name, key, offset, byteSize);
  }

  unregisterSystemSharedMemory(name?: string): void {
    this.#shm.unregister(name);
  }

  cudaSharedMemoryStatus(name?: string): CudaSharedMemoryStatus[] {
    return this.#cudaShm.status(name);
  }

  checkCudaSharedMemoryRegister(name: string): void {
    this.#cudaShm.checkRegister(name);
  }

  registerCudaSharedMemory(name: string, rawHandle: Uint8Array, deviceId: bigint, byteSize: bigint): void {
    this.#cudaShm.register(name, rawHandle, deviceId, byteSize);
  }

  unregisterCudaSharedMemory(name?: string): void {
    this.#cudaShm.unregister(name);
  }

  /** Stops taking requests, drains in-flight work and unloads every model; idempotent. */
  close(): Promise<void> {
    if (this.#poller) clearInterval(this.#poller);
    this.#closing ??= (async () => {
      this.#draining = true;
      await this.#polling;
      await this.#repo.close();
      await this.#tracer.close();
      this.#shm.close();
      this.#cudaShm.close();
      this.#closed = true;
      this.#logger.info('all models unloaded');
    })();
    return this.#closing;
  }
}

const NO_TIMINGS = Object.freeze({ computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 });

function uintParam(params: Parameters, key: string): number | undefined {
  const v = params[key];
  if (v === undefined) return undefined;
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
    throw new InvalidArgError(`parameter '${key}' must be a non-negative integer, got ${JSON.stringify(String(v))}`);
  }
  return n;
}

/** Triton's failure reasons for `nv_inference_request_failure`. */
function failureReason(err: unknown): FailureReason {
  const code = NereidError.from(err).code;
  if (code === 'CANCELLED') return 'CANCELED';
  if (code === 'UNAVAILABLE') return 'REJECTED';
  if (code === 'INTERNAL' || code === 'INVALID_ARG') return 'BACKEND';
  return 'OTHER';
}
