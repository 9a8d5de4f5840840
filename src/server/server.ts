import type { Backend, BackendConfig } from '../backends/backend.js';
import type { ModelConfig } from '../config/model-config.js';
import { dataTypeFromConfig } from '../core/datatypes.js';
import { modelConfigFromJson } from '../config/index.js';
import {
  InternalError,
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
import { checkModelName, writeOverrideDir } from '../repository/overrides.js';
import { latestReady, type Model, type ModelVersion } from '../repository/model.js';
import type {
  CallOptions,
  InferenceServerApi,
  LoadOptions,
  LogSettings,
  ModelIndexEntry,
  ModelMetadata,
  ModelStatistics,
  ServerMetadata,
  TensorMetadata,
  TraceSettings,
} from './api.js';
import { noopObserver, type InferenceObserver } from '../metrics/observer.js';
import { classify } from './classification.js';
import { toModelStatistics } from './statistics.js';
import { Tracer, type TraceOptions } from './trace.js';
import { EXTENSIONS } from './extensions.js';
import { validateRequest } from './validate.js';

export const NEREID_VERSION = '0.1.0';

export interface InferenceServerOptions {
  repositories: readonly string[];
  backends: readonly Backend[];
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
    this.#opts = { strictReadiness: opts.strictReadiness ?? true, id: opts.id ?? 'triton' };
    this.#logger = opts.logger ?? noopLogger;
    this.#mode = opts.modelControlMode ?? 'none';
    this.#tracer = new Tracer(opts.trace);
    if (this.#mode === 'poll') {
      const secs = opts.repositoryPollSecs ?? 15;
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
      backends: opts.backends,
      backendConfig: opts.backendConfig ?? new Map(),
      autoComplete: opts.autoComplete ?? true,
      logger,
    });
    const mode = opts.modelControlMode ?? 'none';
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
    if (failures.length > 0 && (opts.exitOnError ?? true)) {
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

  #resolve(name: string, version?: string): { model: Model; version: ModelVersion; config: ModelConfig } {
    const model = this.#repo.get(name);
    if (!model || !model.config) throw new NotFoundError(`Request for unknown model: '${name}' is not found`);
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
    return { model, version: v, config: model.config };
  }

  checkModel(name: string, version?: string): void {
    this.#resolve(name, version);
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
    const { model, config } = this.#resolve(name, version);
    const batching = (config.max_batch_size ?? 0) > 0;
    const meta = (t: { name?: string; data_type?: string; dims?: number[] }): TensorMetadata => ({
      name: t.name as string,
      datatype: dataTypeFromConfig(t.data_type ?? 'TYPE_INVALID') ?? 'BYTES',
      shape: batching ? [-1, ...(t.dims ?? [])] : [...(t.dims ?? [])],
    });
    const versions = [...model.versions.values()]
      .filter((v) => v.state === 'READY')
      .map((v) => v.version)
      .sort((a, b) => a - b)
      .map(String);
    return {
      name: model.name,
      versions,
      platform: config.platform ?? config.backend ?? '',
      inputs: (config.input ?? []).map(meta),
      outputs: (config.output ?? []).map(meta),
    };
  }

  modelConfig(name: string, version?: string): ModelConfig {
    return this.#resolve(name, version).config;
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

  async infer(request: InferRequest, opts: CallOptions = {}): Promise<InferResponse> {
    if (this.#draining || this.#closing) throw new UnavailableError('server is shutting down');
    this.#inflight++;
    try {
      return await this.#infer(request, opts);
    } finally {
      this.#inflight--;
    }
  }

  async #infer(request: InferRequest, opts: CallOptions): Promise<InferResponse> {
    const requestStart = process.hrtime.bigint();
    const { model, version, config } = this.#resolve(request.model, request.version);
    const checked = validateRequest(request, model.name, config);
    const params = request.parameters ?? {};
    const scheduler = version.scheduler;
    if (!scheduler) throw new UnavailableError(`model '${model.name}' version ${version.version} is not ready`);
    const started = process.hrtime.bigint();
    let result: ScheduledResult;
    try {
      result = await scheduler.enqueue(checked.execute, checked.batchSize, {
        signal: opts.signal,
        priority: uintParam(params, 'priority'),
        timeoutUs: uintParam(params, 'timeout'),
      });
    } catch (err) {
      version.stats.recordFailure(Number(process.hrtime.bigint() - started), failureReason(err));
      throw err;
    }
    const totalNs = Number(process.hrtime.bigint() - started);
    version.stats.recordSuccess(checked.batchSize, totalNs, result.queueNs, result.timings);
    this.#observer.requestSucceeded(model.name, version.version, {
      totalNs,
      queueNs: result.queueNs,
      ...result.timings,
    });
    const traceId = this.#tracer.sample(model.name);
    if (traceId !== 0) {
      // Compute timestamps are derived from the measured durations (the worker's clock is not ours).
      // Batch timings can overlap this request's own clock, so each stamp is capped at the request's end.
      const t = result.timings;
      const end = process.hrtime.bigint();
      const at = (ns: bigint): bigint => (ns < end ? ns : end);
      const computeStart = at(started + BigInt(result.queueNs));
      const inputEnd = at(computeStart + BigInt(t.computeInputNs));
      const outputStart = at(inputEnd + BigInt(t.computeInferNs));
      this.#tracer.record(traceId, model.name, version.version, request.id, {
        REQUEST_START: requestStart,
        QUEUE_START: started,
        COMPUTE_START: computeStart,
        COMPUTE_INPUT_END: inputEnd,
        COMPUTE_OUTPUT_START: outputStart,
        COMPUTE_END: at(outputStart + BigInt(t.computeOutputNs)),
        REQUEST_END: end,
      });
    }
    const batching = (config.max_batch_size ?? 0) > 0;
    const declared = new Map((config.output ?? []).map((o) => [o.name as string, o]));
    const outputs: Tensor[] = checked.outputs.map((req, i) => {
      let t = result.outputs[i];
      const cfg = declared.get(req.name);
      if (cfg?.reshape) t = { ...t, shape: batching ? [t.shape[0], ...(cfg.dims ?? [])] : [...(cfg.dims ?? [])] };
      if (req.classCount !== undefined && req.classCount > 0) {
        t = classify(t, req.classCount, batching, model.labels.get(req.name));
      }
      return t;
    });
    const response: InferResponse = { model: model.name, version: String(version.version), outputs };
    if (request.id !== undefined) response.id = request.id;
    return response;
  }

  repositoryIndex(opts: { ready?: boolean } = {}): ModelIndexEntry[] {
    const rows: ModelIndexEntry[] = [];
    const loaded = new Set(this.#repo.list().map((m) => m.name));
    for (const name of this.#repo.found().keys()) {
      if (!loaded.has(name)) rows.push({ name, version: '', state: '', reason: '' });
    }
    for (const m of this.#repo.list()) {
      if (m.versions.size === 0) {
        rows.push({ name: m.name, version: '', state: m.state, reason: m.reason });
        continue;
      }
      for (const v of [...m.versions.values()].sort((a, b) => a.version - b.version)) {
        rows.push({ name: m.name, version: String(v.version), state: v.state, reason: v.reason });
      }
    }
    rows.sort((a, b) => a.name.localeCompare(b.name) || Number(a.version) - Number(b.version));
    return opts.ready ? rows.filter((r) => r.state === 'READY') : rows;
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
    const name = checkModelName(rawName);
    const files = opts.files ?? new Map();
    if (files.size > 0 && opts.config === undefined) {
      throw new InvalidArgError(
        `load of '${name}': file overrides need the 'config' parameter as well (Triton's rule)`,
      );
    }
    let config: ModelConfig | undefined;
    try {
      config = opts.config === undefined ? undefined : modelConfigFromJson(opts.config, `load request for '${name}'`);
    } catch (err) {
      // Triton's clients look for "failed to load" in this answer.
      const e = NereidError.from(err);
      throw new InvalidArgError(`failed to load '${name}', ${e.message}`, { cause: err });
    }
    let dir: string;
    let tempDir: string | undefined;
    if (files.size > 0) {
      tempDir = await writeOverrideDir(name, files);
      dir = tempDir;
    } else {
      const loc = (await this.#repo.scan()).get(name);
      if (!loc) {
        throw new InternalError(
          `failed to load '${name}': no model folder named '${name}' in the model repositories; add it there or send its files as 'file:' overrides`,
        );
      }
      dir = loc.dir;
    }
    const model = await this.#repo.load(name, { dir, config, tempDir });
    const ready = model.state === 'READY' && [...model.versions.values()].every((v) => v.state === 'READY');
    if (!ready) {
      throw new InvalidArgError(`load failed for model '${name}': ${model.reason || 'no version is ready'}`);
    }
    this.#logger.info({ model: name }, `successfully loaded '${name}'`);
  }

  async unloadModel(rawName: string, _opts: { unloadDependents?: boolean } & CallOptions = {}): Promise<void> {
    this.#checkControl('unload');
    const name = checkModelName(rawName);
    const model = this.#repo.get(name);
    if (!model && !this.#repo.found().has(name)) {
      throw new NotFoundError(
        `failed to unload '${name}': no model named '${name}' is loaded or in the model repositories`,
      );
    }
    // No ensembles yet, so there are no dependents to unload with it.
    await this.#repo.unload(name);
    this.#logger.info({ model: name }, `successfully unloaded '${name}'`);
  }

  modelStatistics(name?: string, version?: string): ModelStatistics[] {
    const models = name ? [this.#repo.get(name)] : this.#repo.list();
    const out: ModelStatistics[] = [];
    for (const m of models) {
      if (!m) throw new NotFoundError(`requested model '${name}' is not found`);
      let versions = [...m.versions.values()].filter((v) => v.state === 'READY');
      if (version !== undefined && version !== '') {
        versions = versions.filter((v) => String(v.version) === version);
        if (versions.length === 0) throw new NotFoundError(`requested model '${name}' version ${version} is not found`);
      } else if (name && versions.length === 0) {
        throw new NotFoundError(`requested model '${name}' has no available versions`);
      }
      for (const v of versions.sort((a, b) => a.version - b.version))
        out.push(toModelStatistics(m.name, v.version, v.stats));
    }
    return out;
  }

  logSettings(): LogSettings {
    const s = this.#switches();
    return {
      log_file: s.file,
      log_info: s.info,
      log_warning: s.warning,
      log_error: s.error,
      log_verbose_level: s.verbose,
      log_format: s.format,
    };
  }

  /** Applies a partial update (validated as a whole first, so a bad key changes nothing) and returns all settings. */
  updateLogSettings(update: Partial<Record<keyof LogSettings, unknown>>): LogSettings {
    const s = this.#switches();
    const next = { ...s };
    for (const [key, value] of Object.entries(update)) {
      const bool = (): boolean => {
        if (typeof value !== 'boolean')
          throw new InvalidArgError(`log setting '${key}' must be a boolean, got ${JSON.stringify(value)}`);
        return value;
      };
      switch (key) {
        case 'log_file':
          // A remote caller must not choose where the server writes (CVE-2024-0087).
          throw new UnsupportedError('log file location can not be updated through network protocol');
        case 'log_info':
          next.info = bool();
          break;
        case 'log_warning':
          next.warning = bool();
          break;
        case 'log_error':
          next.error = bool();
          break;
        case 'log_verbose_level':
          if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
            throw new InvalidArgError(
              `log setting 'log_verbose_level' must be a non-negative integer, got ${JSON.stringify(value)}`,
            );
          }
          next.verbose = value;
          break;
        case 'log_format':
          if (value !== 'default' && value !== 'ISO8601') {
            throw new InvalidArgError(
              `log setting 'log_format' must be "default" or "ISO8601", got ${JSON.stringify(value)}`,
            );
          }
          next.format = value;
          break;
        default:
          throw new InvalidArgError(
            `unknown log setting '${key}'; known: log_file, log_info, log_warning, log_error, log_verbose_level, log_format`,
          );
      }
    }
    Object.assign(s, next);
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
