/**
 * The one restart policy of things Nereid replaces when they die: a model's instances (backends/runtime/pool.ts)
 * and the front-end threads (frontend/pool.ts). A replacement starts after a delay that doubles with every
 * consecutive death or failed start, up to a cap, so a crash loop costs little CPU; a life of `stableMs` or more
 * resets it, so a thing that ran fine for a while and then died comes back quickly.
 *
 * One `RestartBackoff` per restartable thing (an instance slot, a thread index). Its owner reports `up()` when the
 * thing runs (created, listening) and calls `schedule()` when it died or its start failed. A failed start is not a
 * life: only the time since the last `up()` counts toward `stableMs`. Threading: the main thread.
 */

export interface RestartPolicy {
  /** The delay after the first death; it doubles per consecutive death. */
  readonly initialMs: number;
  /** The cap of the delay. */
  readonly maxMs: number;
  /** A thing that ran at least this long before it died restarts after `initialMs` again. */
  readonly stableMs: number;
}

/** 100 ms doubling to 30 s, reset after 30 s of healthy life (what both pools have always used). */
export const DEFAULT_RESTART_POLICY: RestartPolicy = Object.freeze({ initialMs: 100, maxMs: 30_000, stableMs: 30_000 });

export interface RestartBackoffOptions extends Partial<RestartPolicy> {
  /** Whether a pending restart keeps the process alive (a front-end thread must come back; an instance need not). */
  keepAlive?: boolean;
  /** The clock in ms (tests). */
  now?: () => number;
}

export class RestartBackoff {
  readonly #policy: RestartPolicy;
  readonly #keepAlive: boolean;
  readonly #now: () => number;
  /** Deaths and failed starts since the last stable life. */
  #failures = 0;
  /** When the thing last came up; undefined while it is down or starting. */
  #upSince: number | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(opts: RestartBackoffOptions = {}) {
    const { keepAlive = false, now = () => performance.now(), ...policy } = opts;
    this.#policy = { ...DEFAULT_RESTART_POLICY, ...policy };
    this.#keepAlive = keepAlive;
    this.#now = now;
  }

  /** The thing runs: from now its life counts toward `stableMs`. */
  up(): void {
    this.#upSince = this.#now();
  }

  /** It died or its start failed: the delay before the next start (advances the backoff). */
  next(): number {
    const { initialMs, maxMs, stableMs } = this.#policy;
    if (this.#upSince !== undefined && this.#now() - this.#upSince >= stableMs) this.#failures = 0;
    this.#upSince = undefined;
    return Math.min(maxMs, initialMs * 2 ** this.#failures++);
  }

  /** `next()`, then `restart` after that delay (one pending restart at a time); returns the delay. */
  schedule(restart: () => void): number {
    this.cancel();
    const delay = this.next();
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      restart();
    }, delay);
    if (!this.#keepAlive) this.#timer.unref();
    return delay;
  }

  /** Drops a pending restart (the owner is closing). */
  cancel(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
