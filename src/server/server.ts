import type { Backend, BackendConfig } from '../backends/contract.js';
import { BackendRegistry } from '../backends/registry.js';
import type { ModelConfig } from '../config/model-config.js';
import { InvalidArgError, NereidError, NotFoundError, UnavailableError, UnsupportedError } from '../core/errors.js';
import type { InferRequest, InferResponse, Parameters } from '../core/inference.js';
import { noopLogger, type Logger, type LogSwitches, type ServerLogger } from '../core/logger.js';
import type { FailureReason } from '../core/stats.js';
import type { Tensor } from '../core/tensor.js';
import type { ScheduledResult } from '../scheduler/scheduler.js';
import { ModelRepository } from '../repository/manager.js';
import { latestReady, type Model, type ModelVersion } from '../repository/model.js';
import type { ModelSpec } from '../repository/spec.js';
import type {
  CallOptions,
  InferenceServerApi,
  InferOptions,
  LoadOptions,
  LogSettings,
  ModelIndexEntry,
  ModelMetadata,
  ModelStatistics,
  ResolvedModel,
  ServerMetadata,
  TensorMetadata,
  TraceSettings,
} from './api.js';
import { noopObserver, type InferenceObserver } from '../metrics/observer.js';
import { classify } from './classification.js';
import { applyLogSettings, readLogSettings } from './log-settings.js';
import { loadByRequest, unloadByRequest } from './model-control.js';
import { collectStatistics, repositoryIndexRows } from './statistics.js';
import { Tracer, type TraceOptions } from './trace.js';
import { SERVER_DEFAULTS } from './defaults.js';
import { EXTENSIONS } from './extensions.js';
import { validateRequest } from './validate.js';

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
  logger?: Logger;
}

/** The facade every protocol talks to: model lookup, request validation, scheduling, results. */
export class InferenceServer implements InferenceServerApi {
  readonly #repo: ModelRepository;
  readonly #opts: Required<Pick<InferenceServerOptions, 'strictReadiness' | 'id'>>;
  readonly #logger: Logger;
  readonly #mode: 'none' | 'poll' | 'explicit';
  readonly #tracer: Tracer;
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
    this.#tracer = new Tracer(opts.trace);
    if (this.#mode === 'poll') {
      const secs = opts.repositoryPollSecs ?? SERVER_DEFAULTS.repositoryPollSecs;
      this.#poller = setInterval(() => void this.pollRepository(), Math.max(secs, 0.05) * 1000);
      this.#poller.unref();
    }
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
    const repo = new ModelRepository({
      repositories: opts.repositories,
      registry: new BackendRegistry(opts.backends, { gpus: opts.gpus }),
      backendConfig: opts.backendConfig ?? new Map(),
      autoComplete: opts.autoComplete ?? SERVER_DEFAULTS.autoComplete,
      logger,
    });
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
    return new InferenceServer(repo, opts);
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
        throw new UnavailableError(`Request for unknown model: '${name}' version ${version} is not at ready state`);
      }
    } else {
      v = latestReady(model);
      if (!v) throw new NotFoundError(`Request for unknown model: '${name}' has no available versions`);
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

  /** First step of a graceful shutdown: readiness turns false and new requests are refused; in-flight ones go on. */
  beginShutdown(): void {
    this.#draining = true;
  }

  async infer(request: InferRequest, opts: InferOptions = {}): Promise<InferResponse> {
    if (this.#draining || this.#closing) throw new UnavailableError('server is shutting down');
    this.#inflight++;
    try {
      return await this.#infer(request, opts);
    } finally {
      this.#inflight--;
    }
  }

  async #infer(request: InferRequest, opts: InferOptions): Promise<InferResponse> {
    const requestStart = process.hrtime.bigint();
    const r = opts.resolved;
    const target = r instanceof Target && r.fresh(request.model) ? r : this.#resolve(request.model, request.version);
    const { model, versionEntry: version, spec } = target;
    const checked = validateRequest(request, spec);
    const params = request.parameters ?? {};
    const scheduler = version.scheduler;
    if (!scheduler) throw new UnavailableError(`model '${model.name}' version ${version.version} is not ready`);
    const batchSize = checked.request.batchSize;
    const started = process.hrtime.bigint();
    let result: ScheduledResult;
    try {
      result = await scheduler.enqueue(checked.request, {
        signal: opts.signal,
        priority: uintParam(params, 'priority'),
        timeoutUs: uintParam(params, 'timeout'),
      });
    } catch (err) {
      version.stats.recordFailure(Number(process.hrtime.bigint() - started), failureReason(err));
      throw err;
    }
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
    const outputs: Tensor[] = checked.outputs.map((req, i) => {
      let t = result.outputs[i];
      const out = spec.outputs.get(req.name);
      if (out?.reshape !== undefined) t = { ...t, shape: spec.batching ? [t.shape[0], ...out.dims] : [...out.dims] };
      if (req.classCount !== undefined && req.classCount > 0) {
        t = classify(t, req.classCount, spec.batching, spec.labels.get(req.name) as string[] | undefined);
      }
      return t;
    });
    const response: InferResponse = { model: model.name, version: String(version.version), outputs };
    if (request.id !== undefined) response.id = request.id;
    return response;
  }

  repositoryIndex(opts: { ready?: boolean } = {}): ModelIndexEntry[] {
    return repositoryIndexRows(this.#repo, opts.ready ?? false);
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
    const name = await loadByRequest(this.#repo, rawName, opts);
    this.#logger.info({ model: name }, `successfully loaded '${name}'`);
  }

  async unloadModel(rawName: string, opts: { unloadDependents?: boolean } & CallOptions = {}): Promise<void> {
    this.#checkControl('unload');
    const name = await unloadByRequest(this.#repo, rawName, opts.signal);
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

  /** Stops taking requests, drains in-flight work and unloads every model; idempotent. */
  close(): Promise<void> {
    if (this.#poller) clearInterval(this.#poller);
    this.#closing ??= (async () => {
      this.#draining = true;
      await this.#polling;
      await this.#repo.close();
      await this.#tracer.close();
      this.#closed = true;
      this.#logger.info('all models unloaded');
    })();
    return this.#closing;
  }
}

/** A resolved model version (ResolvedModel to protocols); stays valid while its version is READY. */
class Target implements ResolvedModel {
  constructor(
    readonly model: Model,
    readonly versionEntry: ModelVersion,
    readonly spec: ModelSpec,
  ) {}
  get name(): string {
    return this.model.name;
  }
  get version(): number {
    return this.versionEntry.version;
  }
  get maxBatchSize(): number {
    return this.spec.maxBatchSize;
  }
  get inputs(): TensorMetadata[] {
    return [...this.spec.inputs.values()].map((t) => ({ name: t.name, datatype: t.datatype, shape: [...t.fullDims] }));
  }
  /** A version entry belongs to one load of its model: a reload or an unload replaces it. */
  get key(): object {
    return this.versionEntry;
  }
  /** Still the model a request for `name` would get (nothing was unloaded or replaced since the lookup). */
  fresh(name: string): boolean {
    return this.model.name === name && this.versionEntry.state === 'READY';
  }
}

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
