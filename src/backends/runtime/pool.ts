import { NereidError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { Instance, InstanceSpec, ModelHandle } from '../contract.js';

/**
 * The instances of one model version and their health (Triton's model instances, plus what Triton lacks: a
 * dead instance is replaced). Schedulers `take()` an idle instance and `give()` it back after a batch. When an
 * instance dies (its thread or process exited, or its engine faulted), it leaves the rotation at once, its
 * in-flight requests have already failed with an INTERNAL error naming it, and a replacement is created after a
 * backoff that doubles while instances keep dying (so a crash loop costs little CPU). `onHealth` reports every
 * change; the model's lifecycle turns it into READY / UNAVAILABLE with the reason.
 */

export interface PoolHealth {
  /** Instances able to run now. */
  healthy: number;
  total: number;
  /** Why instances are missing ('' when all are healthy). */
  reason: string;
}

export interface PoolOptions {
  logger: Logger;
  /** First restart delay; doubles per consecutive death of a slot, up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** An instance that lived this long before dying restarts after `backoffMs` again. */
  stableMs?: number;
}

interface Slot {
  spec: InstanceSpec;
  instance: Instance | undefined;
  /** Consecutive deaths (or failed re-creations) without a stable life in between. */
  deaths: number;
  startedAt: number;
  timer: NodeJS.Timeout | undefined;
  lastError: string;
}

export class InstancePool {
  readonly #handle: ModelHandle;
  readonly #slots: Slot[];
  readonly #idle: Instance[] = [];
  readonly #opts: Required<PoolOptions>;
  #onHealth: (h: PoolHealth) => void = () => {};
  #onIdle: () => void = () => {};
  #closed = false;

  private constructor(handle: ModelHandle, slots: Slot[], opts: PoolOptions) {
    this.#handle = handle;
    this.#slots = slots;
    this.#opts = { backoffMs: 100, maxBackoffMs: 30_000, stableMs: 30_000, ...opts };
    for (const s of slots) {
      this.#watch(s);
      this.#idle.push(s.instance as Instance);
    }
  }

  /**
   * Creates every instance (in parallel); if one fails, the others are destroyed and the error is thrown. The
   * signal cancels creation (instances already made are destroyed).
   */
  static async create(
    handle: ModelHandle,
    specs: readonly InstanceSpec[],
    opts: PoolOptions,
    signal?: AbortSignal,
  ): Promise<InstancePool> {
    const made = await Promise.allSettled(specs.map((spec) => handle.createInstance(spec, signal)));
    const failed = made.find((m): m is PromiseRejectedResult => m.status === 'rejected');
    const ok = made.flatMap((m) => (m.status === 'fulfilled' ? [m.value] : []));
    if (failed !== undefined || signal?.aborted) {
      await Promise.all(ok.map((i) => i.destroy().catch(() => undefined)));
      throw failed?.reason ?? NereidError.from(signal?.reason);
    }
    const now = performance.now();
    const slots = specs.map((spec, i): Slot => ({
      spec,
      instance: ok[i],
      deaths: 0,
      startedAt: now,
      timer: undefined,
      lastError: '',
    }));
    return new InstancePool(handle, slots, opts);
  }

  /** `health`: every change of healthy instances; `idle`: an instance became available (a restart). */
  on(events: { health?: (h: PoolHealth) => void; idle?: () => void }): void {
    if (events.health) this.#onHealth = events.health;
    if (events.idle) this.#onIdle = events.idle;
  }

  get names(): string[] {
    return this.#slots.map((s) => s.spec.name);
  }

  /** The live instances (for statistics and fault injection in tests); a dead slot is left out. */
  get instances(): Instance[] {
    return this.#slots.flatMap((s) => (s.instance === undefined ? [] : [s.instance]));
  }

  health(): PoolHealth {
    const healthy = this.#slots.filter((s) => s.instance !== undefined).length;
    const missing = this.#slots.filter((s) => s.instance === undefined);
    const reason = missing.map((s) => `instance ${s.spec.name}: ${s.lastError}; restarting`).join('; ');
    return { healthy, total: this.#slots.length, reason };
  }

  /** Idle healthy instances now. */
  get idle(): number {
    return this.#idle.length;
  }

  /**
   * An idle healthy instance, or undefined. With `name`, that instance only (the sequence batcher binds each
   * sequence to one instance).
   */
  take(name?: string): Instance | undefined {
    if (name === undefined) return this.#idle.shift();
    const i = this.#idle.findIndex((x) => x.name === name);
    return i < 0 ? undefined : this.#idle.splice(i, 1)[0];
  }

  /** Returns an instance after its batch; a dead or replaced one is dropped. */
  give(instance: Instance): void {
    if (this.#closed) return;
    if (this.#slots.some((s) => s.instance === instance)) this.#idle.push(instance);
  }

  #watch(slot: Slot): void {
    const instance = slot.instance as Instance;
    void instance.died.then((err) => {
      if (slot.instance !== instance || this.#closed) return;
      slot.instance = undefined;
      const i = this.#idle.indexOf(instance);
      if (i >= 0) this.#idle.splice(i, 1);
      slot.lastError = err.message;
      if (performance.now() - slot.startedAt >= this.#opts.stableMs) slot.deaths = 0;
      slot.deaths++;
      this.#opts.logger.error({ instance: slot.spec.name, err }, `instance ${slot.spec.name} died: ${err.message}`);
      // Release what is left of it (a faulted engine still holds its session).
      void instance.destroy().catch(() => undefined);
      this.#onHealth(this.health());
      this.#scheduleRestart(slot);
    });
  }

  #scheduleRestart(slot: Slot): void {
    const delay = Math.min(this.#opts.maxBackoffMs, this.#opts.backoffMs * 2 ** (slot.deaths - 1));
    this.#opts.logger.info(
      { instance: slot.spec.name, delayMs: delay },
      `restarting instance ${slot.spec.name} in ${delay} ms`,
    );
    slot.timer = setTimeout(() => {
      slot.timer = undefined;
      void this.#restart(slot);
    }, delay);
    slot.timer.unref();
  }

  async #restart(slot: Slot): Promise<void> {
    if (this.#closed) return;
    let instance: Instance;
    try {
      instance = await this.#handle.createInstance(slot.spec);
    } catch (err) {
      slot.deaths++;
      slot.lastError = `re-creation failed: ${NereidError.from(err).message}`;
      this.#opts.logger.error({ instance: slot.spec.name, err }, `instance ${slot.spec.name} could not be restarted`);
      this.#onHealth(this.health());
      this.#scheduleRestart(slot);
      return;
    }
    if (this.#closed) {
      await instance.destroy().catch(() => undefined);
      return;
    }
    slot.instance = instance;
    slot.startedAt = performance.now();
    slot.lastError = '';
    this.#watch(slot);
    this.#idle.push(instance);
    this.#opts.logger.info({ instance: slot.spec.name }, `instance ${slot.spec.name} restarted`);
    this.#onHealth(this.health());
    this.#onIdle();
  }

  /** Stops restarts and destroys every instance. Call after the scheduler drained (no batch in flight). */
  async destroy(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#idle.length = 0;
    for (const s of this.#slots) if (s.timer) clearTimeout(s.timer);
    await Promise.all(this.#slots.map((s) => s.instance?.destroy().catch(() => undefined) ?? Promise.resolve()));
  }
}
