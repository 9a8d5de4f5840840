import type { Backend, BackendConfig } from '../backends/backend.js';
import type { ModelConfig } from '../config/model-config.js';
import { dataTypeFromConfig } from '../core/datatypes.js';
import { InvalidArgError, NereidError, NotFoundError, UnavailableError, UnsupportedError } from '../core/errors.js';
import type { InferRequest, InferResponse, Parameters } from '../core/inference.js';
import { noopLogger, type Logger } from '../core/logger.js';
import type { FailureReason } from '../core/stats.js';
import type { Tensor } from '../core/tensor.js';
import type { ScheduledResult } from '../scheduler/scheduler.js';
import { ModelRepository } from '../repository/manager.js';
import { latestReady, type Model, type ModelVersion } from '../repository/model.js';
import type {
  CallOptions,
  InferenceServerApi,
  LogSettings,
  ModelIndexEntry,
  ModelMetadata,
  ModelStatistics,
  ServerMetadata,
  TensorMetadata,
  TraceSettings,
} from './api.js';
import { classify } from './classification.js';
import { toModelStatistics } from './statistics.js';
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
  logger?: Logger;
}

/** The facade every protocol talks to: model lookup, request validation, scheduling, results. */
export class InferenceServer implements InferenceServerApi {
  readonly #repo: ModelRepository;
  readonly #opts: Required<Pick<InferenceServerOptions, 'strictReadiness' | 'id'>>;
  readonly #logger: Logger;
  #closing: Promise<void> | undefined;

  private constructor(repo: ModelRepository, opts: InferenceServerOptions) {
    this.#repo = repo;
    this.#opts = { strictReadiness: opts.strictReadiness ?? true, id: opts.id ?? 'nereid' };
    this.#logger = opts.logger ?? noopLogger;
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
    await repo.loadAll();
    const failures = repo.failures();
    if (failures.length > 0 && (opts.exitOnError ?? true)) {
      await repo.close();
      throw new UnavailableError(
        `failed to load ${failures.map((f) => `'${f.name}': ${f.reason}`).join('; ')} (start with --exit-on-error=false to serve the other models)`,
      );
    }
    return new InferenceServer(repo, opts);
  }

  isLive(): boolean {
    return this.#closing === undefined;
  }

  isReady(): boolean {
    if (this.#closing !== undefined) return false;
    const models = this.#repo.list();
    return this.#opts.strictReadiness ? models.every((m) => m.state === 'READY') : true;
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

  async infer(request: InferRequest, opts: CallOptions = {}): Promise<InferResponse> {
    if (this.#closing) throw new UnavailableError('server is shutting down');
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
    version.stats.recordSuccess(
      checked.batchSize,
      Number(process.hrtime.bigint() - started),
      result.queueNs,
      result.timings,
    );
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
    for (const m of [...this.#repo.list()].sort((a, b) => a.name.localeCompare(b.name))) {
      if (m.versions.size === 0) {
        rows.push({ name: m.name, version: '', state: m.state, reason: m.reason });
        continue;
      }
      for (const v of [...m.versions.values()].sort((a, b) => a.version - b.version)) {
        rows.push({ name: m.name, version: String(v.version), state: v.state, reason: v.reason });
      }
    }
    return opts.ready ? rows.filter((r) => r.state === 'READY') : rows;
  }

  async loadModel(name: string): Promise<void> {
    throw new UnsupportedError(
      `explicit model load of '${name}' is not implemented yet in Nereid (model control modes)`,
    );
  }

  async unloadModel(name: string): Promise<void> {
    throw new UnsupportedError(
      `explicit model unload of '${name}' is not implemented yet in Nereid (model control modes)`,
    );
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
    throw new UnsupportedError('the logging extension is not implemented yet in Nereid');
  }

  updateLogSettings(): LogSettings {
    throw new UnsupportedError('the logging extension is not implemented yet in Nereid');
  }

  traceSettings(): TraceSettings {
    throw new UnsupportedError('the trace extension is not implemented yet in Nereid');
  }

  updateTraceSettings(): TraceSettings {
    throw new UnsupportedError('the trace extension is not implemented yet in Nereid');
  }

  /** Stops taking requests, drains in-flight work and unloads every model; idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#repo.close().then(() => this.#logger.info('all models unloaded'));
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
