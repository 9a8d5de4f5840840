import { availableParallelism } from 'node:os';

/**
 * Sizing libuv's thread pool for in-process onnxruntime runs.
 *
 * Every run is a synchronous `Run` on a libuv pool thread (koffi `.async`), holding that thread for the whole run.
 * An instance runs one batch at a time, so N instances running at once need N pool threads, and Node's own pool
 * users (fs, dns.lookup, zlib, crypto) need a few more or they queue behind the runs. libuv sizes its pool once,
 * from UV_THREADPOOL_SIZE, at its first use, which in an ESM program happens while the entry module itself is
 * loaded (measured on Node 20: setting the variable in an ES module is too late), so the CLI's CommonJS entry
 * sets it before importing anything (src/cli/nereid.cts).
 *
 * The default cannot know the repository's instance counts (they are read later), so it covers the common
 * cases: 4 threads for Node's own work plus max(16, cores) for runs — CPU instances beyond the core count only
 * queue behind each other anyway, and 16 covers typical GPU setups (a few instances per GPU). Idle pool threads
 * cost a stack's address space and no CPU. A load that brings the in-process instances past the run threads logs
 * a warning (engine.ts) naming the variable to set.
 */

/** Pool threads kept for Node's own users (libuv's default pool size). */
export const RESERVED_POOL_THREADS = 4;

/** libuv's upper bound for UV_THREADPOOL_SIZE. */
const LIBUV_MAX = 1024;

/** The pool size the CLI sets when the operator did not. */
export function defaultThreadPoolSize(cores = availableParallelism()): number {
  return Math.min(LIBUV_MAX, RESERVED_POOL_THREADS + Math.max(16, cores));
}

/**
 * The pool size libuv uses (or will use): UV_THREADPOOL_SIZE as libuv reads it (clamped to 1..1024), 4 when unset.
 * Read from the environment: correct as long as nobody changes the variable after start.
 */
export function threadPoolSize(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number.parseInt(env.UV_THREADPOOL_SIZE ?? '', 10);
  if (!Number.isFinite(n)) return RESERVED_POOL_THREADS;
  return Math.min(LIBUV_MAX, Math.max(1, n));
}

/** Runs that can be in flight at once without waiting for a pool thread (and without starving Node's own work). */
export function runThreads(env: NodeJS.ProcessEnv = process.env): number {
  return Math.max(1, threadPoolSize(env) - RESERVED_POOL_THREADS);
}
