import { rm } from 'node:fs/promises';
import type { PoolHealth } from '../backends/runtime/pool.js';
import type { ModelConfig } from '../config/model-config.js';
import { abortable } from '../core/abortable.js';
import { CancelledError, UnavailableError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { notServing } from './ensemble.js';
import { buildModel, retireModel, type LoaderDeps } from './loader.js';
import { describeFailures, emptyModel, unloadedModel, type Model, type ModelVersion } from './model.js';

/** Where a load takes a model from. */
export interface LoadSource {
  dir: string;
  config?: ModelConfig;
  fingerprint?: string;
  /** Folder made for a load request's file overrides; owned by the model from now on. */
  tempDir?: string;
}

interface PendingLoad {
  key: string;
  /** Its place in the operation order (`#ops` when it was asked for). */
  seq: number;
  controller: AbortController;
  /** Requests waiting for it, and how many of them were cancelled: the load stops when all were. */
  callers: number;
  cancelled: number;
  promise: Promise<Model>;
}

export interface LifecycleDeps extends Omit<LoaderDeps, 'onHealth'> {
  isClosed(): boolean;
  /** `--model-load-retry-count`: how many times a failed load is tried again (Triton's default 0). */
  loadRetryCount?: number;
  /**
   * A load stopped serving: replaced by a reload, unloaded, or closed. Called in the same turn as the swap,
   * before the old load retires (its in-flight requests still finish), so that whatever is keyed by that load
   * (the response cache) is dropped before a request can reach the new one.
   */
  onReplaced?(old: Model): void;
}

/**
 * One object per model name (Triton's ModelLifecycle): it owns the model's current state and runs its load,
 * reload and unload operations one at a time, in the order they were asked for.
 * - A load of the same source while one is pending shares it (10 concurrent loads → one load).
 * - An unload cancels the loads still pending (they answer CANCELLED), then runs: an unload that answered OK is
 *   never undone by a load that was already in flight.
 * - A reload is atomic: the new model is built beside the serving one and swapped in only when every version
 *   it selects is READY; otherwise the serving one stays, and the failure is reported.
 * - Instance health of the current model changes its versions between READY and UNAVAILABLE here too.
 */
export class ModelLifecycle {
  readonly name: string;
  #current: Model;
  #chain: Promise<unknown> = Promise.resolve();
  /** Operations asked for so far. */
  #ops = 0;
  readonly #pending: PendingLoad[] = [];
  readonly #deps: LifecycleDeps;
  readonly #logger: Logger;

  constructor(name: string, initial: Model, deps: LifecycleDeps) {
    this.name = name;
    this.#current = initial;
    this.#deps = deps;
    this.#logger = deps.logger.child({ model: name });
  }

  get current(): Model {
    return this.#current;
  }

  /** Serializes `op` after every operation asked for before it. */
  #enqueue<T>(op: () => Promise<T>): Promise<T> {
    this.#ops++;
    const run = this.#chain.then(op, op);
    this.#chain = run.catch(() => undefined);
    return run;
  }

  /**
   * Loads (or reloads) from `source`. `signal` is the caller's: when every caller of a shared load has cancelled,
   * the load itself is cancelled (the backend's load and instance creation get the signal); a caller that
   * cancels gets CANCELLED at once either way.
   */
  load(source: LoadSource, signal?: AbortSignal): Promise<Model> {
    const key = JSON.stringify([source.dir, source.config ?? null, source.tempDir ?? null]);
    // Only a pending load with no operation asked for after it may be shared: later operations stay later.
    const last = this.#pending[this.#pending.length - 1];
    let pending: PendingLoad;
    if (last !== undefined && last.key === key && last.seq === this.#ops) pending = last;
    else {
      const controller = new AbortController();
      const made: PendingLoad = {
        key,
        seq: this.#ops + 1,
        controller,
        callers: 0,
        cancelled: 0,
        promise: Promise.resolve(this.#current),
      };
      this.#pending.push(made);
      made.promise = this.#enqueue(async () => {
        try {
          return await this.#load(source, controller.signal);
        } finally {
          this.#pending.splice(this.#pending.indexOf(made), 1);
        }
      });
      pending = made;
    }
    pending.callers++;
    if (signal === undefined) return pending.promise;
    return abortable(pending.promise, signal, `load of '${this.name}' was cancelled`, () => {
      if (++pending.cancelled === pending.callers) pending.controller.abort();
    });
  }

  async #load(source: LoadSource, signal: AbortSignal): Promise<Model> {
    if (this.#deps.isClosed()) throw new UnavailableError('server is shutting down');
    if (signal.aborted) throw new CancelledError(`load of '${this.name}' was cancelled by an unload`);
    const old = this.#current;
    const serving = old.state === 'READY';
    if (!serving) this.#current = emptyModel(this.name, source.dir, 'LOADING', '');
    const model = await this.#build(source, signal);
    model.fingerprint = source.fingerprint ?? '';
    model.tempDir = source.tempDir;
    if (signal.aborted || this.#deps.isClosed()) {
      await this.#retire(model);
      if (!serving) this.#current = old;
      throw signal.aborted
        ? new CancelledError(`load of '${this.name}' was cancelled by an unload`)
        : new UnavailableError('server is shutting down');
    }
    const ok = model.state === 'READY' && [...model.versions.values()].every((v) => v.state === 'READY');
    if (ok || !serving) {
      this.#current = model;
      this.#deps.onReplaced?.(old);
      // The old load retires in the background (its in-flight requests finish); a failure there is only logged.
      if (old !== model)
        this.#retire(old).catch((err: unknown) => this.#logger.error({ err }, 'retiring the old load failed'));
    } else {
      await this.#retire(model);
      old.reason = `reload failed, still serving the previous load: ${model.reason || describeFailures(model)}`;
      this.#logger.error(old.reason);
    }
    return model;
  }

  /**
   * One load, tried again up to `--model-load-retry-count` times while a version failed (Triton's retries: a
   * model whose files or GPU were not ready yet). A failed attempt holds nothing (the loader released it).
   */
  async #build(source: LoadSource, signal: AbortSignal): Promise<Model> {
    const deps = { ...this.#deps, onHealth: (m: Model, v: ModelVersion, h: PoolHealth) => this.#onHealth(m, v, h) };
    let model = await buildModel(this.name, source.dir, source.config, deps, signal);
    for (let retry = 1; retry <= (this.#deps.loadRetryCount ?? 0) && !signal.aborted; retry++) {
      if ([...model.versions.values()].every((v) => v.state === 'READY') && model.state === 'READY') break;
      await this.#retire(model);
      this.#logger.warn(`retrying the load of model '${this.name}' (retry ${retry} of ${this.#deps.loadRetryCount})`);
      model = await buildModel(this.name, source.dir, source.config, deps, signal);
    }
    return model;
  }

  /**
   * Unloads: new requests fail at once, queued and running ones finish. Loads still pending are cancelled first.
   * The versions stay listed as UNAVAILABLE "unloaded" (Triton's index).
   */
  unload(): Promise<void> {
    for (const p of this.#pending) p.controller.abort();
    return this.#enqueue(async () => {
      const old = this.#current;
      this.#current = unloadedModel(old);
      this.#deps.onReplaced?.(old);
      await this.#retire(old);
    });
  }

  /** Retires whatever is current (server shutdown): waits for the operations before it. */
  close(): Promise<void> {
    for (const p of this.#pending) p.controller.abort();
    return this.#enqueue(() => {
      this.#deps.onReplaced?.(this.#current);
      return this.#retire(this.#current);
    });
  }

  async #retire(model: Model): Promise<void> {
    await retireModel(model);
    if (model.tempDir) await rm(model.tempDir, { recursive: true, force: true });
  }

  /**
   * This model is an ensemble and one of its composing models changed state: its versions are READY while every
   * composing model serves, else UNAVAILABLE naming the first that does not. Versions not READY for another
   * reason are left alone.
   */
  dependenciesChanged(get: (name: string) => Model | undefined): void {
    const model = this.#current;
    const graph = model.spec?.ensemble;
    if (graph === undefined) return;
    let reason = '';
    for (const name of graph.models) {
      const dep = get(name);
      const why = dep === undefined ? 'not loaded' : notServing(graph, dep);
      if (why !== '') {
        reason = `composing model '${name}' is not available: ${why}`;
        break;
      }
    }
    for (const v of model.versions.values()) {
      const blocked = v.state === 'UNAVAILABLE' && v.reason.startsWith('composing model ');
      if (v.state !== 'READY' && !blocked) continue;
      v.state = reason === '' ? 'READY' : 'UNAVAILABLE';
      v.reason = reason;
    }
    const was = model.state;
    model.state = [...model.versions.values()].some((v) => v.state === 'READY') ? 'READY' : 'UNAVAILABLE';
    model.reason = model.state === 'READY' ? '' : describeFailures(model);
    if (model.state !== was) {
      this.#logger[reason === '' ? 'info' : 'warn'](
        reason === '' ? `ensemble '${this.name}' is READY again` : `ensemble '${this.name}' is UNAVAILABLE: ${reason}`,
      );
    }
  }

  #onHealth(model: Model, version: ModelVersion, h: PoolHealth): void {
    if (model !== this.#current || (version.state !== 'READY' && version.state !== 'UNAVAILABLE')) return;
    if (h.healthy > 0) {
      version.state = 'READY';
      version.reason = '';
    } else {
      version.state = 'UNAVAILABLE';
      version.reason = `no healthy instance (${h.reason})`;
      // Requests already queued would wait for a restart that may take long: answer them now.
      version.scheduler?.failQueued(
        new UnavailableError(`model '${model.name}' version ${version.version} has no healthy instance: ${h.reason}`),
      );
    }
    model.state = [...model.versions.values()].some((v) => v.state === 'READY') ? 'READY' : 'UNAVAILABLE';
    model.reason = model.state === 'READY' ? '' : describeFailures(model);
    this.#logger[h.healthy > 0 ? 'info' : 'error'](
      { version: version.version, healthy: h.healthy, total: h.total },
      h.healthy > 0
        ? `version ${version.version} is READY again`
        : `version ${version.version} is UNAVAILABLE: ${version.reason}`,
    );
  }
}
