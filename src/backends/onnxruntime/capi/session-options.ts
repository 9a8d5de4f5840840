import type { ProviderPlan, SessionPlan } from '../options-capi.js';
import { check, ortApi, type Out, type Ptr } from './api.js';
import { appendProvider } from './providers.js';

/**
 * OrtSessionOptions built from a SessionPlan for one instance. Threading: main thread; the options are released
 * by the caller right after the session is created (onnxruntime copies what it needs).
 */
export interface SessionOptionsInput {
  plan: SessionPlan;
  providers: readonly ProviderPlan[];
  /** The env has global thread pools: the session must not create its own. */
  globalThreadPool: boolean;
  /** onnxruntime log severity for this session (0 verbose … 4 fatal). */
  logSeverity: number;
  /** Log id in onnxruntime's messages: the instance name. */
  logId: string;
  /** Test hook: onnxruntime writes the optimized graph here (observes the graph level). */
  optimizedModelPath?: string;
  /** Told each GPU provider's options as onnxruntime holds them once appended (the engine logs them). */
  onProviderOptions?: (provider: ProviderPlan['name'], text: string) => void;
}

/**
 * Session config entries a GPU instance gets unless its plan sets them: its own intra-/inter-op threads do not
 * spin-wait after their (small: shape and fall-back) CPU nodes. A spinning pool per GPU session competes for the
 * cores the event loop and libuv's threads (which wait on the GPU) need. Measured on the H200 before this change
 * (notes/gpubench-output.txt): a fixed 1.1-1.9 ms per request at concurrency 1 over onnxruntime in Python, worse
 * with two instances than with one; this is the change the next GPU run checks (bench/gpu.ts). Not applied with
 * the global thread pool (its spinning is the env's, set by the backend config).
 */
export function gpuSessionConfig(
  providers: readonly ProviderPlan[],
  sessionConfig: ReadonlyArray<readonly [string, string]>,
  globalThreadPool: boolean,
): Array<[string, string]> {
  if (globalThreadPool || !providers.some((p) => p.name === 'cuda' || p.name === 'tensorrt')) return [];
  const set = new Set(sessionConfig.map(([k]) => k));
  return (['session.intra_op.allow_spinning', 'session.inter_op.allow_spinning'] as const)
    .filter((k) => !set.has(k))
    .map((k) => [k, '0']);
}

/** Creates OrtSessionOptions; the caller releases them (ReleaseSessionOptions) exactly once. */
export function createSessionOptions(input: SessionOptionsInput): Ptr {
  const api = ortApi();
  const { plan } = input;
  const out: Out = [null];
  check(api.CreateSessionOptions(out));
  const so = out[0] as Ptr;
  try {
    check(api.SetSessionLogId(so, input.logId));
    check(api.SetSessionLogSeverityLevel(so, input.logSeverity));
    check(api.SetSessionGraphOptimizationLevel(so, plan.graphLevel));
    if (plan.executionMode !== undefined) check(api.SetSessionExecutionMode(so, plan.executionMode));
    if (input.globalThreadPool) {
      check(api.DisablePerSessionThreads(so));
    } else {
      if (plan.intraOpThreads !== undefined) check(api.SetIntraOpNumThreads(so, plan.intraOpThreads));
      if (plan.interOpThreads !== undefined) check(api.SetInterOpNumThreads(so, plan.interOpThreads));
    }
    if (plan.cpuMemArena !== undefined) check((plan.cpuMemArena ? api.EnableCpuMemArena : api.DisableCpuMemArena)(so));
    if (plan.memPattern !== undefined) check((plan.memPattern ? api.EnableMemPattern : api.DisableMemPattern)(so));
    for (const [k, v] of plan.sessionConfig) check(api.AddSessionConfigEntry(so, k, v));
    for (const [k, v] of gpuSessionConfig(input.providers, plan.sessionConfig, input.globalThreadPool)) {
      check(api.AddSessionConfigEntry(so, k, v));
    }
    if (input.optimizedModelPath !== undefined) check(api.SetOptimizedModelFilePath(so, input.optimizedModelPath));
    for (const p of input.providers) {
      const text = appendProvider(so, p, `instance ${input.logId}`);
      if (text !== undefined) input.onProviderOptions?.(p.name, text);
    }
  } catch (err) {
    api.ReleaseSessionOptions(so);
    throw err;
  }
  return so;
}
