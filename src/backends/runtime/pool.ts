import { NereidError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { RestartBackoff, type RestartPolicy } from '../../core/restart-policy.js';
import type { Instance, InstanceSpec, ModelHandle } from '../contract.js';

/**
 * The instances of one model version and their health (Triton's model instances, plus what Triton lacks: a
 * dead instance is replaced). Schedulers `take()` an idle instance and `give()` it back after a batch. When an
 * instance dies (its thread or process exited, or its engine faulted), it leaves the rotation at once, its
 * in-flight requests have already failed with an INTERNAL error naming it, and a replacement is created after the
 * backoff of core/restart-policy.ts (the front-end threads' too): 100 ms doubling per consecutive death or failed
 * re-creation up to 30 s, reset by 30 s of healthy life. `onHealth` reports every
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
  /** The restart backoff of each slot (tests shorten it); DEFAULT_RESTART_POLICY's where left out. */
  restart?: Partial<RestartPolicy>;
}

interface Slot {
  spec: InstanceSpec;
  instance: Instance | undefined;
  /** When to re-create it: up() once it runs, schedule() when it dies or a re-creation fails. */
  backoff: RestartBackoff;
  lastError: string;
}

export class InstancePool {
  readonly #handle: ModelHandle;
  readonly #slots: Slot[];
  readonly #idle: Instance[] = [];
  readonly #logger: Logger;
  #onHealth: (h: PoolHealth) => void = () => {};
  #onIdle: () => void = () => {};
  #closed = false;

  private constructor(handle: ModelHandle, slots: Slot[], opts: PoolOptions) {
    this.#handle = handle;
    this.#slots = slots;
    this.#logger = opts.logger;
    for (const s of slots) {
      s.backoff.up();
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
    const slots = specs.map((spec, i): Slot => ({
      spec,
      instance: ok[i],
      backoff: new RestartBackoff(opts.restart),
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
      this.#logger.error({ instance: slot.spec.name, err }, `instance ${slot.spec.name} died: ${err.message}`);
      // Release what is left of it (a faulted engine still holds its session).
      void instance.destroy().catch(() => undefined);
      this.#onHealth(this.health());
      this.#scheduleRestart(slot);
    });
  }

  #scheduleRestart(slot: Slot): void {
    const delay = slot.backoff.schedule(() => void this.#restart(slot));
    this.#logger.info(
      { instance: slot.spec.name, delayMs: delay },
      `restarting instance ${slot.spec.name} in ${delay} ms`,
    );
  }

  async #restart(slot: Slot): Promise<void> {
    if (this.#closed) return;
    let instance: Instance;
    try {
      instance = await this.#handle.createInstance(slot.spec);
    } catch (err) {
      slot.lastError = `re-creation failed: ${NereidError.from(err).message}`;
      this.#logger.error({ instance: slot.spec.name, err }, `instance ${slot.spec.name} could not be restarted`);
      this.#onHealth(this.health());
      this.#scheduleRestart(slot);
      return;
    }
    if (this.#closed) {
      await instance.destroy().catch(() => undefined);
      return;
    }
    slot.instance = instance;
    slot.backoff.up();
    slot.lastError = '';
    this.#watch(slot);
    this.#idle.push(instance);
    this.#logger.info({ instance: slot.spec.name }, `instance ${slot.spec.name} restarted`);
    this.#onHealth(this.health());
    this.#onIdle();
  }

  /** Stops restarts and destroys every instance. Call after the scheduler drained (no batch in flight). */
  async destroy(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#idle.length = 0;
    for (const s of this.#slots) s.backoff.cancel();
    await Promise.all(this.#slots.map((s) => s.instance?.destroy().catch(() => undefined) ?? Promise.resolve()));
  }
}
