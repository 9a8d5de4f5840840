import type { RateLimiter } from '../backends/runtime/rate-limiter.js';
import { dirname, resolve } from 'node:path';
import type { Backend, BackendConfig } from '../backends/contract.js';
import type { BackendRegistry } from '../backends/registry.js';
import { resolveBackendSettings } from '../backends/settings.js';
import { InvalidArgError, NereidError } from '../core/errors.js';
import type { StepRunner } from '../scheduler/ensemble/scheduler.js';
import type { Logger } from '../core/logger.js';
import { ModelLifecycle, type LoadSource } from './lifecycle.js';
import { LoadSlots } from './load-slots.js';
import { emptyModel, type Model } from './model.js';
import { modelFolderSigns } from './layout.js';
import { fingerprint, scanRepositories, type ModelLocation } from './scan.js';

export interface RepositoryOptions {
  repositories: readonly string[];
  registry: BackendRegistry;
  /** `--backend-config` values per backend name. */
  backendConfig: ReadonlyMap<string, BackendConfig>;
  autoComplete: boolean;
  logger: Logger;
  /** Runs an ensemble step through the server facade (set by the server, which owns the request path). */
  runStep: StepRunner;
  /** The server has a response cache. */
  responseCache: boolean;
  /** The server's rate limiter (`--rate-limit=execution_count`); none = off. */
  limiter?: RateLimiter;
  /** A load of a model stopped serving (see ModelLifecycle's `onReplaced`). */
  onReplaced?(model: Model): void;
  /** `--model-load-thread-count`: models loading at once (Triton's default 4). */
  modelLoadThreadCount?: number;
  /** `--model-config-name`: each model's `configs/<name>.pbtxt` where it has one. */
  modelConfigName?: string;
  /** `--model-load-retry-count`: tries again of a failed load (Triton's default 0). */
  modelLoadRetryCount?: number;
}

/**
 * The models of the repositories: scans the folders and keeps one lifecycle per model name, which owns that
 * model's state and serializes its loads and unloads. Poll and explicit control build on load/unload.
 */
export class ModelRepository {
  readonly #opts: RepositoryOptions;
  readonly #models = new Map<string, ModelLifecycle>();
  #found = new Map<string, ModelLocation>();
  /** Loads asked of this repository and not finished, by model name (ensembles wait for their steps' loads). */
  readonly #loading = new Map<string, Promise<Model>>();
  /** Ensemble loads waiting for a composing model's load: ensemble → the models it waits for (cycle check). */
  readonly #waits = new Map<string, Set<string>>();
  readonly #loadSlots: LoadSlots;
  #closed = false;

  /** Throws INVALID_ARG for a `--backend-config` mistake: every backend's settings are checked before any load. */
  constructor(opts: RepositoryOptions) {
    this.#opts = { ...opts, backendConfig: resolveBackendSettings(opts.registry.all, opts.backendConfig) };
    this.#loadSlots = new LoadSlots(opts.modelLoadThreadCount);
  }

  get(name: string): Model | undefined {
    return this.#models.get(name)?.current;
  }

  /** The backends models are loaded with (their descriptors say what their model files are and do). */
  get backends(): readonly Backend[] {
    return this.#opts.registry.all;
  }

  list(): Model[] {
    return [...this.#models.values()].map((l) => l.current);
  }

  /** Model folders found by the last scan (loaded or not). */
  found(): ReadonlyMap<string, ModelLocation> {
    return this.#found;
  }

  #lifecycle(name: string, dir: string, reason = ''): ModelLifecycle {
    let l = this.#models.get(name);
    if (l === undefined) {
      l = new ModelLifecycle(name, emptyModel(name, dir, 'UNAVAILABLE', reason), {
        registry: this.#opts.registry,
        backendConfig: this.#opts.backendConfig,
        autoComplete: this.#opts.autoComplete,
        logger: this.#opts.logger,
        runStep: this.#opts.runStep,
        responseCache: this.#opts.responseCache,
        loadSlots: this.#loadSlots,
        configName: this.#opts.modelConfigName,
        loadRetryCount: this.#opts.modelLoadRetryCount,
        limiter: this.#opts.limiter,
        dependency: (dep, ensemble) => this.#dependency(dep, ensemble),
        isClosed: () => this.#closed,
        onReplaced: (m) => this.#opts.onReplaced?.(m),
      });
      this.#models.set(name, l);
    }
    return l;
  }

  /** Model folders of the repositories as last scanned. */
  async scan(): Promise<Map<string, ModelLocation>> {
    for (const repo of this.#opts.repositories) {
      // A model's own folder given as the repository would be served as a model named '1' that no backend runs.
      const signs = await modelFolderSigns(repo, this.#opts.registry);
      if (signs !== undefined) {
        throw new InvalidArgError(
          `model repository '${repo}' is a model folder (it holds ${signs}), not a repository of model folders: ` +
            `give the folder that contains it, --model-repository=${dirname(resolve(repo))}`,
        );
      }
    }
    const { models, duplicates } = await scanRepositories(this.#opts.repositories);
    this.#found = new Map(models.map((m) => [m.name, m]));
    for (const [name, repos] of duplicates) {
      if (this.#models.has(name)) continue;
      const reason = `model '${name}' appears in more than one repository: ${repos.join(', ')}`;
      this.#lifecycle(name, '', reason);
      this.#opts.logger.error({ model: name }, reason);
    }
    return new Map(models.map((m) => [m.name, m]));
  }

  /**
   * Loads the named models, or every model found (`undefined`; model control mode `none`). Failures are
   * recorded as UNAVAILABLE with their reason, never thrown.
   */
  async loadAll(names?: readonly string[]): Promise<void> {
    const found = await this.scan();
    const wanted = names === undefined || names.includes('*') ? [...found.keys()] : names;
    await Promise.all(
      wanted.map(async (name) => {
        const loc = found.get(name);
        if (!loc) {
          const l = this.#lifecycle(name, '');
          l.current.reason = `model '${name}' is not in any model repository`;
          this.#opts.logger.error({ model: name }, `failed to load '${name}': not found in the model repositories`);
          return;
        }
        await this.load(name, { dir: loc.dir }).catch(() => undefined);
      }),
    );
  }

  /** Loads (or atomically reloads) one model through its lifecycle; see ModelLifecycle.load. */
  load(name: string, source: LoadSource, signal?: AbortSignal): Promise<Model> {
    if (this.#closed) return Promise.reject(new NereidError('UNAVAILABLE', 'server is shutting down'));
    const loading = (async () => {
      const fp = source.fingerprint ?? (await fingerprint(source.dir));
      return this.#lifecycle(name, source.dir).load({ ...source, fingerprint: fp }, signal);
    })();
    // Registered before the first await: an ensemble loading beside it finds it and waits.
    const tracked = loading.finally(() => {
      if (this.#loading.get(name) === tracked) this.#loading.delete(name);
      this.#refreshDependents(name);
    });
    this.#loading.set(name, tracked);
    return tracked;
  }

  /**
   * A composing model for an ensemble's load: waits for its load in progress; loads it when it was never loaded
   * (explicit mode) or was unloaded. A model that failed to load is not retried here.
   */
  async #dependency(name: string, ensemble: string): Promise<Model | undefined> {
    if (this.#waitsOn(name, ensemble)) {
      throw new InvalidArgError(
        `ensemble '${ensemble}' and model '${name}' depend on each other (a cycle of ensembles); break the cycle`,
      );
    }
    const waits = this.#waits.get(ensemble) ?? new Set<string>();
    this.#waits.set(ensemble, waits.add(name));
    try {
      const pending = this.#loading.get(name);
      if (pending !== undefined) await pending.catch(() => undefined);
      else {
        const current = this.get(name);
        const never =
          current === undefined ||
          (current.state !== 'READY' && (current.reason === '' || current.reason === 'unloaded'));
        const loc = this.#found.get(name);
        if (never && loc !== undefined) await this.load(name, { dir: loc.dir }).catch(() => undefined);
      }
      return this.get(name);
    } finally {
      waits.delete(name);
      if (waits.size === 0) this.#waits.delete(ensemble);
    }
  }

  /** Whether the load of `from` waits, directly or through other ensembles, for `to`. */
  #waitsOn(from: string, to: string, seen = new Set<string>()): boolean {
    if (from === to) return true;
    if (seen.has(from)) return false;
    seen.add(from);
    for (const next of this.#waits.get(from) ?? []) if (this.#waitsOn(next, to, seen)) return true;
    return false;
  }

  /** Ensembles whose steps run `name`. */
  dependents(name: string): string[] {
    return this.list()
      .filter((m) => m.spec?.ensemble?.models.includes(name))
      .map((m) => m.name);
  }

  /** A model's state changed: the ensembles that use it are READY again, or UNAVAILABLE naming it. */
  #refreshDependents(name: string): void {
    for (const e of this.dependents(name)) this.#models.get(e)?.dependenciesChanged((dep) => this.get(dep));
  }

  /**
   * Unloads a model: new requests fail at once, requests already queued or running finish. With `forget` (its
   * folder is gone in poll mode) it also leaves the index. With `dependents`, the ensembles that use it (and
   * theirs) are unloaded too (Triton's unload_dependents); without, they turn UNAVAILABLE naming it.
   */
  async unload(name: string, opts: { forget?: boolean; dependents?: boolean } = {}): Promise<void> {
    if (opts.dependents) {
      await Promise.all(this.dependents(name).map((e) => this.unload(e, { dependents: true })));
    }
    const l = this.#models.get(name);
    if (l === undefined) return;
    await l.unload();
    if (opts.forget && this.#models.get(name) === l) this.#models.delete(name);
    this.#refreshDependents(name);
  }

  /**
   * Poll mode: rescans the repositories; loads new models, reloads those whose config or files changed, and
   * unloads those whose folder is gone. Returns what it did, for logs and tests.
   */
  async poll(): Promise<{ loaded: string[]; unloaded: string[] }> {
    const found = await this.scan();
    const loaded: string[] = [];
    const unloaded: string[] = [];
    for (const [name, l] of this.#models) {
      if (!found.has(name) && l.current.dir !== '') {
        await this.unload(name, { forget: true });
        unloaded.push(name);
      }
    }
    for (const [name, loc] of found) {
      const current = this.get(name);
      const fp = await fingerprint(loc.dir);
      if (current && current.fingerprint === fp) continue;
      await this.load(name, { dir: loc.dir, fingerprint: fp }).catch(() => undefined);
      loaded.push(name);
    }
    return { loaded, unloaded };
  }

  /** Models that failed, with their reasons. */
  failures(): { name: string; reason: string }[] {
    return this.list()
      .filter((m) => m.state !== 'READY')
      .map((m) => ({ name: m.name, reason: m.reason }));
  }

  /** Drains every scheduler and releases every instance and backend; idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#models.values()].map((l) => l.close()));
    await this.#opts.registry.close();
  }
}
