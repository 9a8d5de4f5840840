import { InvalidArgError } from '../../core/errors.js';
import type { InstanceRateLimit, InstanceSpec } from '../contract.js';

/**
 * Triton's rate limiter (`--rate-limit=execution_count`), one per server, shared by every model: an instance whose
 * group lists `rate_limiter { resources [...] }` runs a batch only while that many copies of each resource are free;
 * it holds them for the execution and gives them back when the batch settles. Resources are counted per device
 * (the instance's GPU; CPU and MODEL instances count against device 0, as Triton places them) unless `global`.
 *
 * Counts: `--rate-limit-resource=NAME:COUNT` for every device, `NAME:COUNT:DEVICE` for one; a resource the flags
 * do not name has the largest count any loaded instance asks for (recomputed as models load and unload), so every
 * instance can run alone. A model asking for more than a flag gives fails to load (Triton's message).
 *
 * Priority (a weight, Triton's: priority 2 gets half the chances of priority 1) is stride scheduling: each grant
 * advances the instance's pass by its priority, and when resources come free the waiting pools are woken in order
 * of their lowest pass, each pumping synchronously so the first to take is the one the order chose.
 * Main thread only; no I/O.
 */

/** `--rate-limit-resource` entries; `device` undefined = every device (and the global copy). */
export interface RateLimitResource {
  name: string;
  count: number;
  device?: number;
}

/** A pool waiting for resources: `rank()` is its best (lowest) pass now; `wake()` pumps its scheduler at once. */
export interface LimiterWaiter {
  rank(): number;
  wake(): void;
}

interface Need {
  key: string;
  name: string;
  count: number;
}

/** One instance's place in the limiter (kept across restarts of the instance). */
export class LimiterTicket {
  readonly needs: readonly Need[];
  readonly weight: number;
  pass = 0;
  holding = false;

  constructor(needs: readonly Need[], weight: number) {
    this.needs = needs;
    this.weight = weight;
  }
}

const GLOBAL = 'global';

export class RateLimiter {
  readonly #given: readonly RateLimitResource[];
  readonly #tickets = new Set<LimiterTicket>();
  /** Copies in use per key (`global/NAME` or `<device>/NAME`). */
  readonly #used = new Map<string, number>();
  readonly #waiters = new Set<LimiterWaiter>();
  /** The pass of the last grant: a ticket that was idle for long starts here, not far behind the others. */
  #clock = 0;

  constructor(resources: readonly RateLimitResource[] = []) {
    this.#given = resources;
  }

  /**
   * Tickets for a model version's instances (in spec order). Throws Triton's load errors: a count above what the
   * server has, or a resource that is global in one place and per-device in another.
   */
  register(specs: readonly InstanceSpec[]): LimiterTicket[] {
    const tickets = specs.map((s) => ticketOf(s.rateLimiter, s.device));
    const all = [...this.#tickets, ...tickets];
    for (const t of tickets) {
      for (const need of t.needs) {
        const other = need.key.startsWith(`${GLOBAL}/`) ? 'device' : GLOBAL;
        if (all.some((u) => u.needs.some((n) => n.name === need.name && kindOf(n.key) === other))) {
          throw new InvalidArgError(
            `Resource "${need.name}" is present as both global and device-specific resource in the model configuration.`,
          );
        }
        const limit = this.#explicit(need);
        if (limit !== undefined && limit < need.count) {
          throw new InvalidArgError(
            `Resource count for "${need.name}" is limited to ${limit} which will prevent scheduling of one or more model instances, the minimum required count is ${need.count}`,
          );
        }
      }
    }
    for (const t of tickets) {
      t.pass = this.#clock;
      this.#tickets.add(t);
    }
    return tickets;
  }

  /** Forgets a version's tickets (its pool was destroyed); default counts shrink with it. */
  unregister(tickets: readonly LimiterTicket[]): void {
    for (const t of tickets) {
      if (t.holding) this.release(t);
      this.#tickets.delete(t);
    }
    this.#wakeAll();
  }

  /** Whether the ticket's resources are all free now (no ticket, or no resources: always). */
  canAcquire(ticket: LimiterTicket | undefined): boolean {
    return (
      ticket === undefined || ticket.needs.every((n) => (this.#used.get(n.key) ?? 0) + n.count <= this.#available(n))
    );
  }

  /** Takes the ticket's resources if all are free now. A ticket with no resources always runs. */
  tryAcquire(ticket: LimiterTicket): boolean {
    if (!this.canAcquire(ticket)) return false;
    for (const n of ticket.needs) this.#used.set(n.key, (this.#used.get(n.key) ?? 0) + n.count);
    ticket.holding = true;
    const start = Math.max(ticket.pass, this.#clock);
    this.#clock = start;
    ticket.pass = start + ticket.weight;
    return true;
  }

  /** The effective pass of a ticket, for ordering waiters. */
  rankOf(ticket: LimiterTicket): number {
    return Math.max(ticket.pass, this.#clock);
  }

  /** Gives a ticket's resources back (its batch settled). Waiters are woken by `wakeAll`. */
  release(ticket: LimiterTicket): void {
    if (!ticket.holding) return;
    ticket.holding = false;
    for (const n of ticket.needs) this.#used.set(n.key, (this.#used.get(n.key) ?? 0) - n.count);
  }

  /** A pool found idle instances it could not run: wake it when resources come free. */
  wait(waiter: LimiterWaiter): void {
    this.#waiters.add(waiter);
  }

  /**
   * Wakes every waiter, lowest pass first. Each is removed before it is woken: one that is still blocked waits
   * again from its pump; one with nothing queued is simply dropped.
   */
  wakeAll(extra?: LimiterWaiter): void {
    if (extra) this.#waiters.add(extra);
    this.#wakeAll();
  }

  #wakeAll(): void {
    const order = [...this.#waiters].map((w) => ({ w, rank: w.rank() })).sort((a, b) => a.rank - b.rank);
    this.#waiters.clear();
    for (const { w } of order) w.wake();
  }

  /** What a flag gives for this need, or undefined when the flags do not name it. */
  #explicit(need: Need): number | undefined {
    const named = this.#given.filter((r) => r.name === need.name);
    if (named.length === 0) return undefined;
    const everywhere = named.findLast((r) => r.device === undefined)?.count;
    if (kindOf(need.key) === GLOBAL) return everywhere;
    const device = Number(need.key.slice(0, need.key.indexOf('/')));
    // Named for other devices only: this device has none (Triton: "limited to 0").
    return named.findLast((r) => r.device === device)?.count ?? everywhere ?? 0;
  }

  #available(need: Need): number {
    const explicit = this.#explicit(need);
    if (explicit !== undefined) return explicit;
    let max = 0;
    for (const t of this.#tickets) for (const n of t.needs) if (n.key === need.key) max = Math.max(max, n.count);
    return max;
  }
}

function kindOf(key: string): string {
  return key.startsWith(`${GLOBAL}/`) ? GLOBAL : 'device';
}

function ticketOf(limit: InstanceRateLimit | undefined, device: number): LimiterTicket {
  const needs = (limit?.resources ?? [])
    .filter((r) => r.count > 0)
    .map((r): Need => ({ key: `${r.global ? GLOBAL : Math.max(device, 0)}/${r.name}`, name: r.name, count: r.count }));
  // Triton's priority 0 (unset) behaves as 1.
  return new LimiterTicket(needs, Math.max(1, limit?.priority ?? 0));
}
