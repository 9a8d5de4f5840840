/**
 * Which runs of a session call `Run` inline on the JavaScript thread instead of on libuv's pool.
 *
 * The hop to the pool is not free: koffi's `.async` submission, a pool thread's wake-up and the completion back on
 * the event loop cost the JavaScript thread ~20 µs of CPU and a run ~45 µs of latency (simple, batch 1, 2-core
 * machine: 27–40 µs main-thread CPU per pooled run against 13–23 µs inline, whose Run itself takes 8–11 µs), and the
 * whole process ~70 µs of CPU per request (server at concurrency 64: 0.72× the CPU per request and 1.4–1.5× the
 * req/s with every run inline). A run shorter than the hop is cheaper inline on every count; a long one must stay on
 * the pool, or it blocks the event loop for its duration.
 *
 * Measured, per input-shape key (a model's runs of one shape take about the same time): a key's first runs go to the
 * pool, whose submit-to-completion time bounds the run from above. Once that bound is under PROBE_MAX_NS, the next
 * run is a probe: inline, timed exactly (up to PROBES runs, the fastest counting: a cold or preempted run does not
 * decide). Keys whose exact moving average is under INLINE_MAX_NS stay inline; the rest go back to the pool and are
 * probed again after REPROBE_AFTER runs, then ever more rarely while their probes keep failing (a shape that was
 * slow only while the machine was busy comes back soon). So no run blocks the loop for longer than about
 * PROBE_MAX_NS, and a shape whose runs are slow does so a few times per REPROBE_AFTER_MAX runs.
 * Ownership: one per runner, used on the JavaScript thread only.
 */

/** Runs whose moving average is under this go inline: about the hop's cost (see above). */
export const INLINE_MAX_NS = 50_000;
/** A pooled run must have completed within this for its shape to be probed inline. */
export const PROBE_MAX_NS = 2_000_000;
/**
 * Pooled runs of a probed-and-too-slow shape before it is probed again: doubling from the first to the second bound
 * while its probes keep failing, back to the first once one succeeds.
 */
export const REPROBE_AFTER = 64;
export const REPROBE_AFTER_MAX = 4096;
/** Inline runs a probe may take, the fastest counting, before a slow shape goes back to the pool. */
const PROBES = 3;
/** Keys remembered; beyond it the oldest is forgotten (Map order). */
const CAPACITY = 256;

interface Entry {
  /** Moving average of the exact (inline) run times, ns; undefined until the first probe. */
  avgNs: number | undefined;
  /** The next run is a probe. */
  probe: boolean;
  /** Pooled runs since the last inline one. */
  pooled: number;
  /** Probes left before a slow shape goes back to the pool. */
  probes: number;
  /** Pooled runs before the next probe (REPROBE_AFTER…REPROBE_AFTER_MAX). */
  reprobe: number;
}

export class InlineRuns {
  readonly #entries = new Map<string, Entry>();

  /** Whether the next run of `key` calls Run inline. */
  inline(key: string): boolean {
    const e = this.#entries.get(key);
    if (e === undefined) return false;
    return e.probe || (e.avgNs !== undefined && e.avgNs < INLINE_MAX_NS);
  }

  /** A run of `key` took `ns`: exactly, when it ran inline; an upper bound (pool hop, busy event loop) when not. */
  observe(key: string, ns: number, inline: boolean): void {
    let e = this.#entries.get(key);
    if (e === undefined) {
      if (this.#entries.size >= CAPACITY) this.#entries.delete(this.#entries.keys().next().value as string);
      e = { avgNs: undefined, probe: false, pooled: 0, probes: 0, reprobe: REPROBE_AFTER };
      this.#entries.set(key, e);
    }
    if (inline) {
      // A sample counts for at most twice the limit: one run preempted for milliseconds on a busy machine must not
      // outweigh a thousand short ones, while a shape that really got slow passes the limit within a few runs.
      ns = Math.min(ns, 2 * INLINE_MAX_NS);
      if (e.avgNs === undefined || e.pooled > 0) {
        // A probe after pooled runs starts afresh: what the shape costs now.
        e.avgNs = ns;
        e.probes = PROBES - 1;
      } else if (e.avgNs >= INLINE_MAX_NS && e.probes > 0) {
        // One slow run (a cold first run, a preempted one) does not decide: the fastest probe does.
        e.avgNs = Math.min(e.avgNs, ns);
        e.probes--;
      } else {
        e.avgNs += (ns - e.avgNs) / 8;
      }
      e.probe = e.avgNs >= INLINE_MAX_NS && e.probes > 0;
      if (e.avgNs < INLINE_MAX_NS) e.reprobe = REPROBE_AFTER;
      e.pooled = 0;
      return;
    }
    e.pooled++;
    if (ns >= PROBE_MAX_NS) return;
    if (e.avgNs === undefined) e.probe = true;
    else if (e.pooled >= e.reprobe) {
      e.probe = true;
      e.reprobe = Math.min(2 * e.reprobe, REPROBE_AFTER_MAX);
    }
  }
}
