import { NereidError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { RestartBackoff, type RestartPolicy } from '../../core/restart-policy.js';
import type { Instance, InstanceSpec, ModelHandle } from '../contract.js';
import type { LimiterTicket, LimiterWaiter, RateLimiter } from './rate-limiter.js';

/**
 * The instances of one model version and their health (Triton's model instances, plus what Triton lacks: a
 * dead instance is replaced). Schedulers `take()` an idle instance and `give()` it back after a batch. When an
 * instance dies (its thread or process exited, or its engine faulted), it leaves the rotation at once, its
 * in-flight requests have already failed with an INTERNAL error naming it, and a replacement is created after the
 * backoff of core/restart-policy.ts (the front-end threads' too): 100 ms doubling per consecutive death or failed
 * re-creation up to 30 s, reset by 30 s of healthy life. `onHealth` reports every
 * change; the model's lifecycle turns it into READY / UNAVAILABLE with the reason.
 *
 * With a rate limiter (`--rate-limit=execution_count`), an idle instance is taken only when the limiter grants
 * its resources; they are held until `give()`. A pool that had idle instances it could not run waits on the
 * limiter, which wakes it (its scheduler's synchronous `wake` pump) in priority order when resources come free.
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
  /** The server's rate limiter; none = instances run whenever idle (`--rate-limit=off`). */
  limiter?: RateLimiter;
}

interface Slot {
  spec: InstanceSpec;
  instance: Instance | undefined;
  /** When to re-create it: up() once it runs, schedule() when it dies or a re-creation fails. */
  backoff: RestartBackoff;
  lastError: string;
  /** Its place in the rate limiter (kept across restarts), when there is one. */
  ticket: LimiterTicket | undefined;
}

export class InstancePool {
  readonly #handle: ModelHandle;
  readonly #slots: Slot[];
  readonly #idle: Instance[] = [];
  readonly #logger: Logger;
  #onHealth: (h: PoolHealth) => void = () => {};
  #onIdle: () => void = () => {};
  #onWake: (() => void) | undefined;
  readonly #limiter: RateLimiter | undefined;
  /** Tickets of instances taken and not yet given back: released at give(), even for an instance that died. */
  readonly #held = new Map<Instance, LimiterTicket>();
  readonly #waiter: LimiterWaiter = {
    rank: () => Math.min(...this.#idle.map((i) => this.#rank(i))),
    wake: () => (this.#onWake ?? this.#onIdle)(),
  };
  #closed = false;

  private constructor(handle: ModelHandle, slots: Slot[], opts: PoolOptions) {
    this.#handle = handle;
    this.#slots = slots;
    this.#logger = opts.logger;
    this.#limiter = opts.limiter;
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
    // Before any instance exists: a resource count the server cannot give fails the load at once (Triton's).
    const tickets = opts.limiter?.register(specs);
    const made = await Promise.allSettled(specs.map((spec) => handle.createInstance(spec, signal)));
    const failed = made.find((m): m is PromiseRejectedResult => m.status === 'rejected');
    const ok = made.flatMap((m) => (m.status === 'fulfilled' ? [m.value] : []));
    if (failed !== undefined || signal?.aborted) {
      if (tickets) opts.limiter?.unregister(tickets);
      await Promise.all(ok.map((i) => i.destroy().catch(() => undefined)));
      throw failed?.reason ?? NereidError.from(signal?.reason);
    }
    const slots = specs.map((spec, i): Slot => ({
      spec,
      instance: ok[i],
      backoff: new RestartBackoff(opts.restart),
      lastError: '',
      ticket: tickets?.[i],
    }));
    return new InstancePool(handle, slots, opts);
  }

  /**
   * `health`: every change of healthy instances; `idle`: an instance became available (a restart); `wake`: the
   * rate limiter freed resources: pump now, synchronously, so that the limiter's priority order holds (default:
   * `idle`).
   */
  on(events: { health?: (h: PoolHealth) => void; idle?: () => void; wake?: () => void }): void {
    if (events.health) this.#onHealth = events.health;
    if (events.idle) this.#onIdle = events.idle;
    if (events.wake) this.#onWake = events.wake;
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

  /**
   * Idle healthy instances that may run now (with a rate limiter: whose resources are free). When idle instances
   * are blocked by the limiter, the pool waits on it and is woken when resources come free.
   */
  get idle(): number {
    const limiter = this.#limiter;
    if (limiter === undefined) return this.#idle.length;
    const n = this.#idle.filter((i) => limiter.canAcquire(this.#ticketOf(i))).length;
    if (n === 0 && this.#idle.length > 0) limiter.wait(this.#waiter);
    return n;
  }

  /**
   * An idle healthy instance that may run now, or undefined. With `name`, that instance only (the sequence batcher
   * binds each sequence to one instance). With a rate limiter, the instance holds its resources until `give()`.
   */
  take(name?: string): Instance | undefined {
    const limiter = this.#limiter;
    let blocked = false;
    for (const [i, instance] of this.#idle.entries()) {
      if (name !== undefined && instance.name !== name) continue;
      const ticket = this.#ticketOf(instance);
      if (limiter !== undefined && ticket !== undefined) {
        if (!limiter.tryAcquire(ticket)) {
          blocked = true;
          continue;
        }
        this.#held.set(instance, ticket);
      }
      this.#idle.splice(i, 1);
      return instance;
    }
    if (blocked) limiter?.wait(this.#waiter);
    return undefined;
  }

  /** Returns an instance after its batch (and its resources); a dead or replaced one is dropped. */
  give(instance: Instance): void {
    const ticket = this.#held.get(instance);
    if (ticket !== undefined) {
      this.#held.delete(instance);
      this.#limiter?.release(ticket);
    }
    if (!this.#closed && this.#slots.some((s) => s.instance === instance)) this.#idle.push(instance);
    // Every pool waiting for what was freed, this one among them, in the limiter's order.
    if (ticket !== undefined) this.#limiter?.wakeAll(this.#closed ? undefined : this.#waiter);
  }

  #ticketOf(instance: Instance): LimiterTicket | undefined {
    return this.#slots.find((s) => s.instance === instance)?.ticket;
  }

  #rank(instance: Instance): number {
    const ticket = this.#ticketOf(instance);
    return ticket === undefined || this.#limiter === undefined ? 0 : this.#limiter.rankOf(ticket);
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
    this.#limiter?.unregister(this.#slots.flatMap((s) => (s.ticket === undefined ? [] : [s.ticket])));
    await Promise.all(this.#slots.map((s) => s.instance?.destroy().catch(() => undefined) ?? Promise.resolve()));
  }
}
