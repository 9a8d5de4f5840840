import { BackendRegistry } from '../backends/registry.js';
import { RateLimiter } from '../backends/runtime/rate-limiter.js';
import type { ModelConfig } from '../config/model-config.js';
import { AlreadyExistsError, InvalidArgError, UnavailableError, UnsupportedError } from '../core/errors.js';
import type { InferRequest, InferResponse } from '../core/inference.js';
import { noopLogger, type Logger, type LogSwitches, type ServerLogger } from '../core/logger.js';
import type { Tensor } from '../core/tensor.js';
import { ModelRepository } from '../repository/manager.js';
import type { Model } from '../repository/model.js';
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
  TraceSettings,
} from './api.js';
import type { InferenceObserver } from '../metrics/observer.js';
import { applyLogSettings, readLogSettings } from './log-settings.js';
import { loadByRequest, unloadByRequest } from './model-control.js';
import { collectStatistics, repositoryIndexRows } from './statistics.js';
import { Tracer } from './trace.js';
import { SERVER_DEFAULTS } from './defaults.js';
import { sweepLeftovers } from './startup-sweep.js';
import { EXTENSIONS } from './extensions.js';
import { PathRedactor } from './redact.js';
import { sliceSource, usesSharedMemory, withSharedMemory, type SliceSource } from './shm/bind.js';
import { CudaSharedMemory } from './shm/cuda.js';
import { SystemSharedMemory } from './shm/regions.js';
import { takeSequenceParams } from './sequence-params.js';
import { forgetLoad, ResponseCache } from './response-cache.js';
import type { StepRequest } from '../scheduler/ensemble/scheduler.js';
import { Target } from './target.js';
import { modelMetadataOf, resolveTarget } from './resolve.js';
import { loadAtStart } from './startup.js';
import type { InferenceServerOptions } from './options.js';
import { InferencePipeline } from './pipeline.js';
import { parseVersionString } from './version-string.js';
import { NEREID_VERSION } from '../core/version.js';

export type { InferenceServerOptions } from './options.js';

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
  readonly #pipeline: InferencePipeline;
  /** Inference requests inside infer() now (for the shutdown countdown). */
  #inflight = 0;
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
    this.#pipeline = new InferencePipeline({ cache: this.#cache, tracer: this.#tracer, logger: this.#logger });
  }

  /** Poll mode: rescans every `--repository-poll-secs`, from the end of the first load on. */
  #startPolling(opts: InferenceServerOptions): void {
    if (this.#mode !== 'poll') return;
    const secs = opts.repositoryPollSecs ?? SERVER_DEFAULTS.repositoryPollSecs;
    this.#poller = setInterval(() => void this.pollRepository(), Math.max(secs, 0.05) * 1000).unref();
  }

  /** Poll mode's rescan (tests run it too): loads new, reloads changed (atomically), unloads removed; one at a time. */
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
      ...opts, // repositories, modelLoad{Thread,Retry}Count, modelConfigName: the same options, by name
      registry: new BackendRegistry(opts.backends, { gpus: opts.gpus }),
      backendConfig: opts.backendConfig ?? new Map(),
      autoComplete: opts.autoComplete ?? SERVER_DEFAULTS.autoComplete,
      logger,
      runStep: (step, signal): Promise<Tensor[]> => server.#runStep(step, signal),
      responseCache: opts.responseCacheBytes !== undefined,
      limiter: opts.rateLimit?.mode === 'execution_count' ? new RateLimiter(opts.rateLimit.resources) : undefined,
      onReplaced: (old) => server.#cache && forgetLoad(server.#cache, old, repo),
    });
    const server: InferenceServer = new InferenceServer(repo, opts);
    await server.#tracer.start((msg) => logger.warn(msg));
    // Backends whose models call models (Python BLS) do it through infer(), like any client.
    for (const b of opts.backends) (b as { attachModelCaller?(c: InferenceServer): void }).attachModelCaller?.(server);
    await loadAtStart(repo, opts);
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
    return resolveTarget(this.#repo, this.#paths, name, version);
  }

  checkModel(name: string, version?: string): ResolvedModel {
    return this.#resolve(name, version);
  }

  /** Not ready is false; a version string that is not one is an error (Triton's ModelReady). */
  modelReady(name: string, version?: string): boolean {
    parseVersionString(version);
    try {
      this.#resolve(name, version);
      return true;
    } catch {
      return false;
    }
  }

  modelMetadata(name: string, version?: string): ModelMetadata {
    const { model, spec } = this.#resolve(name, version);
    return modelMetadataOf(model, spec);
  }

  modelConfig(name: string, version?: string): ModelConfig {
    return this.#resolve(name, version).spec.config as ModelConfig;
  }

  /** Per-request observations for latency summaries and histograms (the metrics endpoint sets it). */
  setObserver(observer: InferenceObserver): void {
    this.#pipeline.observer = observer;
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
      // No views: writing the outputs into a region can fail (a slice too small), and the response, whose lease only
      // the caller would release, is then lost.
      const run = (bound: InferRequest) => this.#infer(bound, opts.views ? { ...opts, views: false } : opts);
      return await withSharedMemory(
        this.#slices,
        request,
        { deviceTensors: this.#takesDeviceTensors(request, opts) },
        run,
      );
    } finally {
      this.#inflight--;
    }
  }

  /** The request's target, resolved once: the protocol's lookup when still fresh, else now. */
  #target(request: InferRequest, opts: InferOptions): Target {
    const r = opts.resolved;
    return r instanceof Target && r.fresh(request.model) ? r : this.#resolve(request.model, request.version);
  }

  /** A model that cannot be resolved answers its error later, in #infer. */
  #takesDeviceTensors(request: InferRequest, opts: InferOptions): boolean {
    try {
      return this.#target(request, opts).takesDeviceTensors;
    } catch {
      return false;
    }
  }

  async #infer(request: InferRequest, opts: InferOptions): Promise<InferResponse> {
    const requestStart = process.hrtime.bigint();
    const target = this.#target(request, opts);
    const { sequence, rest } = takeSequenceParams(request.parameters);
    if (sequence !== undefined && target.spec.sequence === undefined && target.spec.ensemble === undefined) {
      throw new InvalidArgError(
        `inference request to model '${target.model.name}' has sequence parameters (sequence_id, sequence_start, sequence_end), but the model has no sequence_batching; send them only to sequence models`,
      );
    }
    return this.#pipeline.run(target, request, opts, requestStart, sequence, rest);
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
      trace: step.trace,
    };
    const target = this.#resolve(request.model, request.version);
    const sequence =
      step.correlationId !== undefined && (target.spec.sequence !== undefined || target.spec.ensemble !== undefined)
        ? { correlationId: step.correlationId, start: step.sequence?.start ?? false, end: step.sequence?.end ?? false }
        : undefined;
    const response = await this.#pipeline.run(target, request, { signal }, requestStart, sequence, step.parameters);
    return response.outputs;
  }

  repositoryIndex(opts: { ready?: boolean } = {}): ModelIndexEntry[] {
    return repositoryIndexRows(this.#repo, opts.ready ?? false).map((r) =>
      r.reason === '' ? r : { ...r, reason: this.#paths.redact(r.reason) },
    );
  }

  /** Triton's refusal outside explicit mode: one message for none and poll, UNAVAILABLE (model_repository_manager.cc). */
  #checkControl(): void {
    if (this.#closing) throw new UnavailableError('server is shutting down');
    if (this.#mode === 'explicit') return;
    throw new UnavailableError('explicit model load / unload is not allowed if polling is enabled');
  }

  async loadModel(rawName: string, opts: LoadOptions & CallOptions = {}): Promise<void> {
    this.#checkControl();
    let name: string;
    try {
      name = await loadByRequest(this.#repo, rawName, { ...opts, allowCode: this.#allowCode });
    } catch (err) {
      throw this.#paths.redactError(err);
    }
    this.#logger.info({ model: name }, `successfully loaded '${name}'`);
  }

  async unloadModel(rawName: string, opts: { unloadDependents?: boolean } & CallOptions = {}): Promise<void> {
    this.#checkControl();
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
    return this.#tracer.settings(model === undefined ? undefined : this.#resolve(model).model.name);
  }

  updateTraceSettings(model: string | undefined, update: Record<string, unknown>): TraceSettings {
    return this.#tracer.update(model === undefined ? undefined : this.#resolve(model).model.name, update);
  }
  /** OpenTelemetry spans that never reached the collector (the metrics endpoint exports the count). */
  readonly droppedTraceSpans = (): number => this.#tracer.droppedSpans();

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
