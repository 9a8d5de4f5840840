import { UnavailableError } from '../../../core/errors.js';
import { check, ortApi, type Out, type Ptr } from './api.js';

/**
 * The process's OrtEnv. onnxruntime allows one per process (a second CreateEnv returns the first and ignores its
 * arguments), and the global thread pools are fixed when it is created. We hold it while any session exists
 * (reference count) and release it with the last one, so a later load may create it with other global-pool
 * settings (tests do; a server's backend-config never changes).
 *
 * Threading: main thread only. Owns the OrtEnv and the CPU OrtMemoryInfo every input tensor points at.
 */

/** Global thread pools (`--backend-config=onnxruntime,enable-global-threadpool=1`); 0 = onnxruntime's default. */
export interface GlobalThreadPool {
  intraOpThreads: number;
  interOpThreads: number;
}

export interface EnvOptions {
  /** onnxruntime's default log severity: 0 verbose … 4 fatal. */
  logSeverity: number;
  globalThreadPool?: GlobalThreadPool;
}

/** What a session needs from the environment while it lives. Release exactly once. */
export interface EnvLease {
  readonly env: Ptr;
  /** CPU memory (arena allocator, default memory type): the location of every tensor we create. */
  readonly cpuMemoryInfo: Ptr;
  /** True when sessions must call DisablePerSessionThreads (the env has global pools). */
  readonly globalThreadPool: boolean;
  release(): void;
}

interface Held {
  env: Ptr;
  cpuMemoryInfo: Ptr;
  key: string;
  refs: number;
}

let held: Held | undefined;

const PER_SESSION = 'per-session';

const keyOf = (o: EnvOptions): string =>
  o.globalThreadPool === undefined
    ? PER_SESSION
    : `global(intra=${o.globalThreadPool.intraOpThreads},inter=${o.globalThreadPool.interOpThreads})`;

function create(opts: EnvOptions): Held {
  const api = ortApi();
  const out: Out = [null];
  if (opts.globalThreadPool === undefined) {
    check(api.CreateEnv(opts.logSeverity, 'nereid', out));
  } else {
    check(api.CreateThreadingOptions(out));
    const tp = out[0] as Ptr;
    try {
      check(api.SetGlobalIntraOpNumThreads(tp, opts.globalThreadPool.intraOpThreads));
      check(api.SetGlobalInterOpNumThreads(tp, opts.globalThreadPool.interOpThreads));
      check(api.CreateEnvWithGlobalThreadPools(opts.logSeverity, 'nereid', tp, out));
    } finally {
      api.ReleaseThreadingOptions(tp);
    }
  }
  const env = out[0] as Ptr;
  try {
    // OrtArenaAllocator (1), OrtMemTypeDefault (0): what onnxruntime's own CPU tensors use.
    check(api.CreateCpuMemoryInfo(1, 0, out));
  } catch (err) {
    api.ReleaseEnv(env);
    throw err;
  }
  return { env, cpuMemoryInfo: out[0] as Ptr, key: keyOf(opts), refs: 0 };
}

/** A new reference on `h`. */
function lease(h: Held): EnvLease {
  h.refs++;
  let released = false;
  return {
    env: h.env,
    cpuMemoryInfo: h.cpuMemoryInfo,
    globalThreadPool: h.key !== PER_SESSION,
    release(): void {
      if (released) return;
      released = true;
      if (--h.refs > 0) return;
      const api = ortApi();
      api.ReleaseMemoryInfo(h.cpuMemoryInfo);
      api.ReleaseEnv(h.env);
      if (held === h) held = undefined;
    },
  };
}

/**
 * Takes a reference on the environment, creating it when none is held. Throws UNAVAILABLE when it is held with
 * other global-pool settings (onnxruntime cannot have two).
 */
export function acquireEnv(opts: EnvOptions): EnvLease {
  const key = keyOf(opts);
  if (held !== undefined && held.key !== key) {
    throw new UnavailableError(
      `onnxruntime's environment is running with ${held.key} thread pools and cannot change to ${key} while ` +
        'models use it; every model of a server shares --backend-config=onnxruntime,enable-global-threadpool',
    );
  }
  held ??= create(opts);
  return lease(held);
}

/**
 * A reference on whatever environment is held (or a new per-session one): for short-lived sessions that only
 * read a model's signature, which must not fight a running server's global-pool setting.
 */
export function acquireAnyEnv(logSeverity: number): EnvLease {
  held ??= create({ logSeverity });
  return lease(held);
}

/** References held right now (tests check that every load is undone). */
export function envReferences(): number {
  return held?.refs ?? 0;
}
