import { availableParallelism } from 'node:os';
import { suggestion } from '../../config/config-error.js';
import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError } from '../../core/errors.js';
import type { BackendConfig, InstanceSpec } from '../contract.js';
import type { GlobalThreadPool } from './capi/env.js';
import { cudaPlan, openvinoPlan, parseBool, parseInt32, tensorrtPlan, type ProviderPlan } from './provider-options.js';

export type { ProviderName, ProviderPlan } from './provider-options.js';

/**
 * Triton's onnxruntime-backend options (SPEC §4, seed 003) mapped onto onnxruntime C API calls, Triton's way
 * (its onnxruntime.cc is the reference for names, defaults and errors). Pure: no I/O, no native calls. The
 * engine resolves a SessionPlan once per model and turns it into OrtSessionOptions per instance
 * (capi/session-options.ts), adding the instance's device. The execution providers' options: provider-options.ts.
 */

/** GraphOptimizationLevel values of the C API. */
export const GRAPH_LEVEL = { disabled: 0, basic: 1, extended: 2, all: 99 } as const;

/** Everything a model's sessions are created with. Frozen, plain data. */
export interface SessionPlan {
  /** SetSessionGraphOptimizationLevel. */
  readonly graphLevel: number;
  /** SetSessionExecutionMode: 0 sequential, 1 parallel; undefined leaves onnxruntime's default (sequential). */
  readonly executionMode?: 0 | 1;
  /** SetIntraOpNumThreads / SetInterOpNumThreads; undefined leaves onnxruntime's default (or the global pool). */
  readonly intraOpThreads?: number;
  readonly interOpThreads?: number;
  /** Enable/DisableCpuMemArena, Enable/DisableMemPattern; undefined leaves onnxruntime's default (on). */
  readonly cpuMemArena?: boolean;
  readonly memPattern?: boolean;
  /** AddSessionConfigEntry. */
  readonly sessionConfig: ReadonlyArray<readonly [string, string]>;
  /** AddRunConfigEntry on every run's options (Triton: memory.enable_memory_arena_shrinkage). */
  readonly runConfig: ReadonlyArray<readonly [string, string]>;
  /** Set when the global thread pool is on: the env's pools; sessions call DisablePerSessionThreads. */
  readonly globalThreadPool?: GlobalThreadPool;
  /** Providers of a KIND_GPU instance, in priority order (TensorRT before its CUDA fall-back); device_id added. */
  readonly gpuProviders: readonly ProviderPlan[];
  /** Providers of every instance (OpenVINO for the CPU). */
  readonly cpuProviders: readonly ProviderPlan[];
  /** GPU arenas named by memory.enable_memory_arena_shrinkage: only KIND_GPU instances may have them. */
  readonly shrinksGpuArena: boolean;
  /** Options accepted but without effect here, one sentence each (the engine logs them). */
  readonly warnings: readonly string[];
}

function graphLevel(level: unknown): number {
  if (level === undefined || level === 0) return GRAPH_LEVEL.all;
  if (level === -1) return GRAPH_LEVEL.basic;
  if (level === 1) return GRAPH_LEVEL.extended;
  if (level === 2) return GRAPH_LEVEL.disabled;
  throw new InvalidArgError(
    `optimization.graph.level: expected -1 (basic), 1 (extended) or 2 (disabled), got ${String(level)}`,
  );
}

/** Instances of every group (count defaults to 1), whatever their kind: each one is a session. */
export function totalInstances(config: ModelConfig): number {
  const groups = config.instance_group ?? [];
  if (groups.length === 0) return 1;
  return Math.max(
    1,
    groups.reduce((n, g) => n + (Number.isSafeInteger(g.count) && (g.count ?? 1) >= 0 ? (g.count ?? 1) : 1), 0),
  );
}

/**
 * Intra-op threads when neither the model nor the backend config says: the machine's cores shared between the
 * model's instances (at least 1). Nereid's own default, not onnxruntime's (a pool of every core per session):
 * instances run at the same time, and N pools of every core oversubscribe the CPU the main thread needs too
 * (measured in wave 1: text_encoder, 2 instances, 2 cores: 1,165 req/s with onnxruntime's default, 1,845 with 1
 * thread each). `intra_op_thread_count: "0"` still asks for onnxruntime's default.
 */
function defaultIntraOpThreads(config: ModelConfig): number {
  return Math.max(1, Math.floor(availableParallelism() / totalInstances(config)));
}

type Params = Readonly<Record<string, string>>;

/** `execution_mode`: 0 sequential, 1 parallel; undefined when the model does not say. */
function executionModeOf(params: Params): 0 | 1 | undefined {
  if (params.execution_mode === undefined) return undefined;
  const m = params.execution_mode.trim();
  if (m !== '0' && m !== '1') {
    throw new InvalidArgError(
      `parameter 'execution_mode': expected 0 (sequential) or 1 (parallel), got '${params.execution_mode}'`,
    );
  }
  return m === '0' ? 0 : 1;
}

type ThreadPlan = Pick<SessionPlan, 'intraOpThreads' | 'interOpThreads' | 'globalThreadPool'>;

/** Thread counts: the model's parameters, or the backend config's when the global thread pool is on. */
function threadPlan(config: ModelConfig, params: Params, backendConfig: BackendConfig, warnings: string[]): ThreadPlan {
  const pool = backendConfig['enable-global-threadpool'];
  const useGlobal = pool !== undefined && parseBool("backend-config 'onnxruntime,enable-global-threadpool'", pool);
  const counts: Record<'intra_op_thread_count' | 'inter_op_thread_count', number | undefined> = {
    intra_op_thread_count: undefined,
    inter_op_thread_count: undefined,
  };
  const backendCounts = { ...counts };
  for (const key of ['intra_op_thread_count', 'inter_op_thread_count'] as const) {
    // Validate the backend-config value even when unused, so a typo fails at load rather than later.
    const b = backendConfig[key];
    if (b !== undefined) backendCounts[key] = parseInt32(`backend-config 'onnxruntime,${key}'`, b, 0);
    const m = params[key];
    if (m !== undefined) counts[key] = parseInt32(`parameter '${key}'`, m, 0);
    if (useGlobal && m !== undefined) {
      warnings.push(`parameter '${key}' is ignored: the global thread pool is enabled (backend-config applies)`);
    }
  }
  if (useGlobal) {
    return {
      intraOpThreads: undefined,
      interOpThreads: undefined,
      globalThreadPool: {
        intraOpThreads: backendCounts.intra_op_thread_count ?? 0,
        interOpThreads: backendCounts.inter_op_thread_count ?? 0,
      },
    };
  }
  // 0 means "let onnxruntime pick" in Triton, expressed by not calling SetIntra/InterOpNumThreads.
  const intra = counts.intra_op_thread_count;
  const inter = counts.inter_op_thread_count;
  return {
    intraOpThreads: intra === undefined ? defaultIntraOpThreads(config) : intra > 0 ? intra : undefined,
    interOpThreads: inter !== undefined && inter > 0 ? inter : undefined,
    globalThreadPool: undefined,
  };
}

type MemoryPlan = Pick<SessionPlan, 'cpuMemArena' | 'memPattern' | 'sessionConfig' | 'runConfig' | 'shrinksGpuArena'>;

/** Arenas, memory patterns and the session and run config entries the memory parameters become. */
function memoryPlan(params: Params): MemoryPlan {
  const cpuMemArena =
    params.enable_mem_arena === undefined
      ? undefined
      : parseBool("parameter 'enable_mem_arena'", params.enable_mem_arena);
  const memPattern =
    params.enable_mem_pattern === undefined
      ? undefined
      : parseBool("parameter 'enable_mem_pattern'", params.enable_mem_pattern);

  const sessionConfig: Array<[string, string]> = [];
  const devAlloc = params['session.use_device_allocator_for_initializers'];
  if (devAlloc !== undefined) {
    const on = parseBool("parameter 'session.use_device_allocator_for_initializers'", devAlloc);
    sessionConfig.push(['session.use_device_allocator_for_initializers', on ? '1' : '0']);
  }

  const runConfig: Array<[string, string]> = [];
  let shrinksGpuArena = false;
  const shrink = params['memory.enable_memory_arena_shrinkage'];
  if (shrink !== undefined) {
    // onnxruntime's format: "cpu:0", "gpu:0", "cpu:0;gpu:1" (device:id pairs, ';'-separated).
    if (shrink !== '' && !/^(cpu|gpu):\d+(;(cpu|gpu):\d+)*$/.test(shrink)) {
      throw new InvalidArgError(
        `parameter 'memory.enable_memory_arena_shrinkage': expected a device list like 'cpu:0' or 'cpu:0;gpu:0', got '${shrink}'`,
      );
    }
    shrinksGpuArena = /gpu:/.test(shrink);
    if (shrink !== '') runConfig.push(['memory.enable_memory_arena_shrinkage', shrink]);
  }
  return { cpuMemArena, memPattern, sessionConfig, runConfig, shrinksGpuArena };
}

type AcceleratorPlan = Pick<SessionPlan, 'gpuProviders' | 'cpuProviders'>;

/** The execution providers the config's `execution_accelerators` (and CUDA parameters) ask for. */
function acceleratorPlan(config: ModelConfig, params: Params, warnings: string[]): AcceleratorPlan {
  const gpuProviders: ProviderPlan[] = [];
  const cpuProviders: ProviderPlan[] = [];
  const eas = config.optimization?.execution_accelerators;
  let cudaEa: { parameters?: Record<string, string> } | undefined;
  for (const ea of eas?.gpu_execution_accelerator ?? []) {
    const field = 'optimization.execution_accelerators.gpu_execution_accelerator';
    if (ea.name === 'tensorrt') gpuProviders.push(tensorrtPlan(field, ea));
    else if (ea.name === 'cuda') cudaEa = ea;
    else {
      throw new InvalidArgError(
        `unknown Execution Accelerator '${ea.name ?? ''}' is requested in ${field}${suggestion(ea.name ?? '', ['tensorrt', 'cuda'])} (known: 'tensorrt', 'cuda')`,
      );
    }
  }
  // KIND_GPU always runs on the CUDA provider: alone, or as TensorRT's fall-back for the nodes TensorRT cannot take.
  gpuProviders.push(cudaPlan('optimization.execution_accelerators.gpu_execution_accelerator', cudaEa, params));
  for (const ea of eas?.cpu_execution_accelerator ?? []) {
    const field = 'optimization.execution_accelerators.cpu_execution_accelerator';
    if (ea.name === 'openvino') cpuProviders.push(openvinoPlan(field, ea));
    else {
      throw new InvalidArgError(
        `unknown Execution Accelerator '${ea.name ?? ''}' is requested in ${field}${suggestion(ea.name ?? '', ['openvino'])} (known: 'openvino')`,
      );
    }
  }
  const gpuNames = (eas?.gpu_execution_accelerator ?? []).map((ea) => ea.name ?? '');
  const cpuWarning = cpuInstancesIgnore(config, gpuNames);
  if (cpuWarning !== undefined) warnings.push(cpuWarning);
  return {
    gpuProviders,
    cpuProviders,
  };
}

/**
 * Maps a model config and `--backend-config=onnxruntime,...` to a SessionPlan. Throws INVALID_ARG naming the
 * option for a bad value or an unknown accelerator or accelerator parameter. The parts are checked in a fixed
 * order (execution mode, threads, memory, accelerators, graph level), so a config with several bad values is
 * always reported by the same one.
 */
export function planSession(config: ModelConfig, backendConfig: BackendConfig = {}): SessionPlan {
  const params: Record<string, string> = {};
  for (const [k, v] of Object.entries(config.parameters ?? {})) params[k] = v.string_value ?? '';
  const warnings: string[] = [];
  const executionMode = executionModeOf(params);
  const threads = threadPlan(config, params, backendConfig, warnings);
  const memory = memoryPlan(params);
  const accelerators = acceleratorPlan(config, params, warnings);
  return Object.freeze({
    graphLevel: graphLevel(config.optimization?.graph?.level),
    executionMode,
    intraOpThreads: threads.intraOpThreads,
    interOpThreads: threads.interOpThreads,
    cpuMemArena: memory.cpuMemArena,
    memPattern: memory.memPattern,
    sessionConfig: memory.sessionConfig,
    runConfig: memory.runConfig,
    globalThreadPool: threads.globalThreadPool,
    gpuProviders: accelerators.gpuProviders,
    cpuProviders: accelerators.cpuProviders,
    shrinksGpuArena: memory.shrinksGpuArena,
    warnings,
  });
}

/**
 * The one warning a load gives when GPU accelerators meet CPU instances (Triton ignores them there: its
 * onnxruntime backend reads `gpu_execution_accelerator` only for KIND_GPU). Groups are normalized by then, so a
 * KIND_AUTO group on a machine without a usable GPU arrives as KIND_CPU; an unnormalized one counts as GPU.
 */
function cpuInstancesIgnore(config: ModelConfig, gpuNames: readonly string[]): string | undefined {
  if (gpuNames.length === 0) return undefined;
  const cpuGroups = (config.instance_group ?? []).filter((g) => g.kind === 'KIND_CPU');
  if (cpuGroups.length === 0) return undefined;
  const groups = config.instance_group ?? [];
  const which =
    cpuGroups.length === groups.length
      ? "this model's instances are"
      : `the instances of group ${cpuGroups.map((g) => `'${g.name ?? ''}'`).join(', ')} are`;
  return (
    `optimization.execution_accelerators.gpu_execution_accelerator (${gpuNames.join(', ')}) is ignored: ` +
    `${which} KIND_CPU (written, or KIND_AUTO on a machine without a usable GPU) and run on the CPU without it, ` +
    'as Triton does; it applies to KIND_GPU instances only (nereid gpu check tells whether this machine has one)'
  );
}

/**
 * Whether sessions of this plan replay CUDA graphs (the CUDA provider's `enable_cuda_graph`): they run on the
 * engine-thread transport, whose instance thread can copy into and out of the graphs' fixed device buffers.
 */
export function usesCudaGraphs(plan: SessionPlan): boolean {
  return plan.gpuProviders.some(
    (p) => p.name === 'cuda' && p.options.some(([k, v]) => k === 'enable_cuda_graph' && v === '1'),
  );
}

/** The providers of one instance, device ids filled in. Throws INVALID_ARG for a config the kind cannot take. */
export function providersFor(plan: SessionPlan, spec: Pick<InstanceSpec, 'kind' | 'device' | 'name'>): ProviderPlan[] {
  if (spec.kind === 'KIND_GPU') {
    if (!Number.isSafeInteger(spec.device) || spec.device < 0) {
      throw new InvalidArgError(`instance ${spec.name}: KIND_GPU needs a GPU id, got ${spec.device}`);
    }
    const device = String(spec.device);
    return [
      ...plan.gpuProviders.map((p) => ({ name: p.name, options: [...p.options, ['device_id', device] as const] })),
      ...plan.cpuProviders,
    ];
  }
  if (spec.kind === 'KIND_MODEL') {
    throw new InvalidArgError(`instance ${spec.name}: KIND_MODEL is not supported by the onnxruntime backend`);
  }
  // A CPU instance ignores gpu_execution_accelerator, as Triton does (planSession warned once at load). KIND_GPU
  // instances above always get every GPU provider the config names: one that cannot load there is a load error,
  // never a silent CPU fall-back.
  if (plan.shrinksGpuArena) {
    throw new InvalidArgError(
      `parameter 'memory.enable_memory_arena_shrinkage' names a GPU arena, but instance ${spec.name} is ${spec.kind}; use 'cpu:0'`,
    );
  }
  return [...plan.cpuProviders];
}
