import type * as grpc from '@grpc/grpc-js';
import { InvalidArgError, UnsupportedError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { InferenceServerApi, LogSettings } from '../../server/api.js';
import { callSignal } from './infer.js';
import type { LogSettingMsg, RepositoryParameterMsg } from './messages.js';
import { toStatus } from './status.js';
import { rejectMalformed } from './malformed.js';
import { checkJsonDepth } from '../kserve/json-depth.js';

/* Handlers of every rpc except inference. Each is a thin mapping between proto messages and the facade,
 * which owns validation, metadata and errors; protocol-specific rules (Triton's) are noted where they apply. */

type Req = Record<string, unknown>;
type Handler = (request: Req, call: grpc.ServerUnaryCall<unknown, unknown>) => unknown;

/** Wraps a handler so that anything it throws or rejects with goes through the one status mapping. */
export function unary(name: string, logger: Logger, fn: Handler): grpc.handleUnaryCall<unknown, unknown> {
  return (call, callback) => {
    Promise.resolve()
      .then(() => {
        rejectMalformed(call.request);
        return fn(call.request as Req, call);
      })
      .then(
        (resp) => callback(null, resp),
        (err: unknown) => callback(toStatus(err, logger, name)),
      );
  };
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const opt = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** A uint64 field as received (`longs: String`), exact. */
const u64 = (v: unknown): bigint => (typeof v === 'string' || typeof v === 'number' ? BigInt(v) : 0n);

/** An int64 field as received (`longs: String`), exact; negative values stay negative (and are refused later). */
const i64 = (v: unknown): bigint => (typeof v === 'string' || typeof v === 'number' ? BigInt(v) : 0n);

/** Status lists as the proto's map, keyed by region name. */
function regionMap<T extends { name: string }>(regions: T[]): Record<string, T> {
  return Object.fromEntries(regions.map((r) => [r.name, r]));
}

function refuseRepositoryName(req: Req): void {
  if (str(req.repository_name) !== '') {
    throw new UnsupportedError("'repository_name' specification is not supported");
  }
}

function loadOptions(
  model: string,
  params: Record<string, RepositoryParameterMsg>,
): {
  config?: string;
  files: Map<string, Uint8Array>;
} {
  const files = new Map<string, Uint8Array>();
  let config: string | undefined;
  for (const [key, p] of Object.entries(params)) {
    if (key === 'config') {
      if (p.parameter_choice !== 'string_param') {
        throw new InvalidArgError("'config' must be a string_param holding the JSON config");
      }
      config = p.string_param as string;
      checkJsonDepth(config, undefined, `failed to load '${model}', config`);
    } else if (key.startsWith('file:')) {
      if (p.parameter_choice !== 'bytes_param') throw new InvalidArgError(`'${key}' must be a bytes_param`);
      files.set(key.slice('file:'.length), p.bytes_param as Uint8Array);
    }
  }
  return { config, files };
}

/** LogSettings values both ways: booleans, uint32 levels and strings, each in its oneof member. */
function logSettingsMsg(s: LogSettings): Record<string, LogSettingMsg> {
  const out: Record<string, LogSettingMsg> = {};
  for (const [key, v] of Object.entries(s)) {
    if (typeof v === 'boolean') out[key] = { bool_param: v };
    else if (typeof v === 'number') out[key] = { uint32_param: v };
    else out[key] = { string_param: String(v) };
  }
  return out;
}

function logUpdate(settings: Record<string, LogSettingMsg>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, p] of Object.entries(settings)) {
    out[key] = p.parameter_choice === undefined ? null : p[p.parameter_choice];
  }
  return out;
}

/** Trace settings arrive as string lists: empty clears a setting; only `trace_level` is a real list. */
function traceUpdate(settings: Record<string, { value: string[] }>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, { value }] of Object.entries(settings)) {
    out[key] = value.length === 0 ? null : key === 'trace_level' ? value : value[0];
  }
  return out;
}

function traceSettingsMsg(s: Record<string, string | string[]>): Record<string, { value: string[] }> {
  const out: Record<string, { value: string[] }> = {};
  for (const [key, v] of Object.entries(s)) out[key] = { value: Array.isArray(v) ? v : [v] };
  return out;
}

/** The GRPCInferenceService handlers other than ModelInfer/ModelStreamInfer. */
// Long: the table of GRPCInferenceService methods, one short handler each.
export function serviceHandlers(
  api: InferenceServerApi,
  logger: Logger,
): Record<string, grpc.handleUnaryCall<unknown, unknown>> {
  const h = (name: string, fn: Handler): grpc.handleUnaryCall<unknown, unknown> => unary(name, logger, fn);
  return {
    ServerLive: h('ServerLive', () => ({ live: api.isLive() })),
    ServerReady: h('ServerReady', () => ({ ready: api.isReady() })),
    // Triton answers an unknown model with ready=false, not an error.
    ModelReady: h('ModelReady', (r) => ({ ready: api.modelReady(str(r.name), opt(r.version)) })),
    ServerMetadata: h('ServerMetadata', () => api.metadata()),
    ModelMetadata: h('ModelMetadata', (r) => api.modelMetadata(str(r.name), opt(r.version))),
    // The facade's config already uses the proto's field and enum names, so it serializes as ModelConfig.
    ModelConfig: h('ModelConfig', (r) => ({ config: api.modelConfig(str(r.name), opt(r.version)) })),
    ModelStatistics: h('ModelStatistics', (r) => ({
      model_stats: api.modelStatistics(opt(r.name), opt(r.version)),
    })),
    RepositoryIndex: h('RepositoryIndex', (r) => {
      refuseRepositoryName(r);
      return { models: api.repositoryIndex({ ready: r.ready === true }) };
    }),
    RepositoryModelLoad: h('RepositoryModelLoad', async (r, call) => {
      refuseRepositoryName(r);
      const { signal, dispose } = callSignal(call);
      try {
        const params = (r.parameters ?? {}) as Record<string, RepositoryParameterMsg>;
        await api.loadModel(str(r.model_name), { ...loadOptions(str(r.model_name), params), signal });
      } finally {
        dispose();
      }
      return {};
    }),
    RepositoryModelUnload: h('RepositoryModelUnload', async (r, call) => {
      refuseRepositoryName(r);
      const params = (r.parameters ?? {}) as Record<string, RepositoryParameterMsg>;
      const dependents = params.unload_dependents;
      if (dependents !== undefined && dependents.parameter_choice !== 'bool_param') {
        throw new InvalidArgError("'unload_dependents' must be a bool_param");
      }
      const { signal, dispose } = callSignal(call);
      try {
        await api.unloadModel(str(r.model_name), { unloadDependents: dependents?.bool_param, signal });
      } finally {
        dispose();
      }
      return {};
    }),
    // Status calls stay allowed when client shared memory is off (and list nothing then), as Triton's.
    SystemSharedMemoryStatus: h('SystemSharedMemoryStatus', (r) => ({
      regions: regionMap(api.systemSharedMemoryStatus(opt(r.name))),
    })),
    SystemSharedMemoryRegister: h('SystemSharedMemoryRegister', (r) => {
      api.registerSystemSharedMemory(str(r.name), str(r.key), u64(r.offset), u64(r.byte_size));
      return {};
    }),
    SystemSharedMemoryUnregister: h('SystemSharedMemoryUnregister', (r) => {
      api.unregisterSystemSharedMemory(opt(r.name));
      return {};
    }),
    CudaSharedMemoryStatus: h('CudaSharedMemoryStatus', (r) => ({
      regions: regionMap(api.cudaSharedMemoryStatus(opt(r.name))),
    })),
    CudaSharedMemoryRegister: h('CudaSharedMemoryRegister', (r) => {
      api.checkCudaSharedMemoryRegister(str(r.name));
      const handle = r.raw_handle instanceof Uint8Array ? r.raw_handle : new Uint8Array(0);
      api.registerCudaSharedMemory(str(r.name), handle, i64(r.device_id), u64(r.byte_size));
      return {};
    }),
    CudaSharedMemoryUnregister: h('CudaSharedMemoryUnregister', (r) => {
      api.unregisterCudaSharedMemory(opt(r.name));
      return {};
    }),
    TraceSetting: h('TraceSetting', (r) => {
      const model = opt(r.model_name);
      const settings = (r.settings ?? {}) as Record<string, { value: string[] }>;
      const result =
        Object.keys(settings).length === 0
          ? api.traceSettings(model)
          : api.updateTraceSettings(model, traceUpdate(settings));
      return { settings: traceSettingsMsg(result) };
    }),
    LogSettings: h('LogSettings', (r) => {
      const settings = (r.settings ?? {}) as Record<string, LogSettingMsg>;
      const result =
        Object.keys(settings).length === 0 ? api.logSettings() : api.updateLogSettings(logUpdate(settings));
      return { settings: logSettingsMsg(result) };
    }),
  };
}

/** grpc.health.v1.Health/Check: SERVING while the server is live (Triton's answer for any service name). */
export function healthHandlers(
  api: InferenceServerApi,
  logger: Logger,
): Record<string, grpc.handleUnaryCall<unknown, unknown>> {
  return {
    Check: unary('Health/Check', logger, () => ({ status: api.isLive() ? 'SERVING' : 'NOT_SERVING' })),
  };
}
