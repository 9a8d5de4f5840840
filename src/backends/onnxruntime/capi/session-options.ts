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
    if (input.optimizedModelPath !== undefined) check(api.SetOptimizedModelFilePath(so, input.optimizedModelPath));
    for (const p of input.providers) appendProvider(so, p, `instance ${input.logId}`);
  } catch (err) {
    api.ReleaseSessionOptions(so);
    throw err;
  }
  return so;
}
