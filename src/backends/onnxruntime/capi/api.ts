import koffi, { type KoffiFunction } from 'koffi';
import { UnavailableError } from '../../../core/errors.js';
import { loadOrtLibrary } from './library.js';

/**
 * onnxruntime's C API table (`OrtApi`), reached through `OrtGetApiBase()->GetApi(ORT_API_VERSION)` with koffi.
 *
 * `OrtApi` is a struct of function pointers that only ever grows at its end, so a function's index is its
 * position in the struct of onnxruntime_c_api.h (1.30, ORT_API_VERSION 30). We declare only what we call, in one
 * table; `capi.test.ts` checks a few entries against behaviour (an index off by one calls the wrong function).
 *
 * Every handle (OrtSession*, OrtValue*, ...) is a koffi pointer value (`Ptr`); out-parameters are one-element
 * arrays koffi fills (`[null]`). Calls are synchronous on the calling thread except the `*Async` helpers, which
 * run on libuv's thread pool (koffi `.async`) and settle on the JavaScript thread.
 */

/** The API version we ask for: onnxruntime 1.30's. An older library refuses it (GetApi returns null). */
export const ORT_API_VERSION = 30;

/** A native pointer as koffi hands it to JavaScript (an External); never dereferenced in JavaScript. */
export type Ptr = object;
/** An out-parameter: koffi writes the pointer into element 0. */
export type Out<T = Ptr> = [T | null];
/** A status: null for success, else an OrtStatus* the caller releases (see `check`). */
export type Status = Ptr | null;

const P = 'void*';
const OUT = '_Out_ void**';
const STR = 'const char*';

/** [index in OrtApi, result type, parameter types]. The one place that knows the struct's layout. */
const TABLE = {
  GetErrorCode: [1, 'int', [P]],
  GetErrorMessage: [2, STR, [P]],
  CreateEnv: [3, P, ['int', STR, OUT]],
  CreateSession: [7, P, [P, STR, P, OUT]],
  // The name, input and output arrays are PointerArrays (handles.ts): native memory onnxruntime reads and, for the
  // outputs, fills; no per-element conversion.
  Run: [9, P, [P, P, P, P, 'size_t', P, 'size_t', P]],
  CreateSessionOptions: [10, P, [OUT]],
  SetOptimizedModelFilePath: [11, P, [P, STR]],
  SetSessionExecutionMode: [13, P, [P, 'int']],
  EnableMemPattern: [16, P, [P]],
  DisableMemPattern: [17, P, [P]],
  EnableCpuMemArena: [18, P, [P]],
  DisableCpuMemArena: [19, P, [P]],
  SetSessionLogId: [20, P, [P, STR]],
  SetSessionLogSeverityLevel: [22, P, [P, 'int']],
  SetSessionGraphOptimizationLevel: [23, P, [P, 'int']],
  SetIntraOpNumThreads: [24, P, [P, 'int']],
  SetInterOpNumThreads: [25, P, [P, 'int']],
  SessionGetInputCount: [30, P, [P, P]],
  SessionGetOutputCount: [31, P, [P, P]],
  SessionGetInputTypeInfo: [33, P, [P, 'size_t', OUT]],
  SessionGetOutputTypeInfo: [34, P, [P, 'size_t', OUT]],
  SessionGetInputName: [36, P, [P, 'size_t', P, OUT]],
  SessionGetOutputName: [37, P, [P, 'size_t', P, OUT]],
  CreateRunOptions: [39, P, [OUT]],
  RunOptionsSetRunLogSeverityLevel: [41, P, [P, 'int']],
  RunOptionsSetRunTag: [42, P, [P, STR]],
  RunOptionsSetTerminate: [46, P, [P]],
  RunOptionsUnsetTerminate: [47, P, [P]],
  CreateTensorAsOrtValue: [48, P, [P, P, 'size_t', 'int', OUT]],
  // The hot path's tensors: the OrtValue* is written into a one-slot PointerArray (an address, not a koffi pointer).
  CreateTensorWithDataAsOrtValue: [49, P, [P, P, 'size_t', P, 'size_t', 'int', P]],
  // The same function over a device address (a CUDA pointer as an integer: never memory JavaScript could view).
  CreateTensorWithDeviceDataAsOrtValue: [49, P, [P, 'uint64_t', 'size_t', P, 'size_t', 'int', OUT]],
  GetTensorMutableData: [51, P, [P, OUT]],
  FillStringTensor: [52, P, [P, 'const char**', 'size_t']],
  GetStringTensorDataLength: [53, P, [P, P]],
  GetStringTensorContent: [54, P, [P, P, 'size_t', P, 'size_t']],
  CastTypeInfoToTensorInfo: [55, P, [P, OUT]],
  GetOnnxTypeFromTypeInfo: [56, P, [P, P]],
  GetTensorElementType: [60, P, [P, P]],
  GetDimensionsCount: [61, P, [P, P]],
  GetDimensions: [62, P, [P, P, 'size_t']],
  GetTensorTypeAndShape: [65, P, [P, OUT]],
  CreateMemoryInfo: [68, P, [STR, 'int', 'int', 'int', OUT]],
  CreateCpuMemoryInfo: [69, P, ['int', 'int', OUT]],
  AllocatorFree: [76, P, [P, P]],
  GetAllocatorWithDefaultOptions: [78, P, [OUT]],
  ReleaseEnv: [92, 'void', [P]],
  ReleaseStatus: [93, 'void', [P]],
  ReleaseMemoryInfo: [94, 'void', [P]],
  ReleaseSession: [95, 'void', [P]],
  ReleaseValue: [96, 'void', [P]],
  // The same over an address (handles.ts: a value the hot path keeps as a number).
  ReleaseValueAt: [96, 'void', ['uintptr_t']],
  ReleaseRunOptions: [97, 'void', [P]],
  ReleaseTypeInfo: [98, 'void', [P]],
  ReleaseTensorTypeAndShapeInfo: [99, 'void', [P]],
  ReleaseSessionOptions: [100, 'void', [P]],
  CreateEnvWithGlobalThreadPools: [119, P, ['int', STR, P, OUT]],
  DisablePerSessionThreads: [120, P, [P]],
  CreateThreadingOptions: [121, P, [OUT]],
  ReleaseThreadingOptions: [122, 'void', [P]],
  FillStringTensorElement: [129, P, [P, STR, 'size_t']],
  AddSessionConfigEntry: [130, P, [P, STR, STR]],
  CreateAllocator: [131, P, [P, P, OUT]],
  ReleaseAllocator: [132, 'void', [P]],
  SetGlobalIntraOpNumThreads: [147, P, [P, 'int']],
  SetGlobalInterOpNumThreads: [148, P, [P, 'int']],
  AddRunConfigEntry: [165, P, [P, STR, STR]],
  SessionOptionsAppendExecutionProvider_TensorRT_V2: [170, P, [P, P]],
  CreateTensorRTProviderOptions: [171, P, [OUT]],
  UpdateTensorRTProviderOptions: [172, P, [P, 'const char**', 'const char**', 'size_t']],
  GetTensorRTProviderOptionsAsString: [173, P, [P, P, OUT]],
  ReleaseTensorRTProviderOptions: [174, 'void', [P]],
  SessionOptionsAppendExecutionProvider_CUDA_V2: [204, P, [P, P]],
  CreateCUDAProviderOptions: [205, P, [OUT]],
  UpdateCUDAProviderOptions: [206, P, [P, 'const char**', 'const char**', 'size_t']],
  GetCUDAProviderOptionsAsString: [207, P, [P, P, OUT]],
  ReleaseCUDAProviderOptions: [208, 'void', [P]],
  GetBuildInfoString: [254, STR, []],
  SessionOptionsAppendExecutionProvider_OpenVINO_V2: [275, P, [P, 'const char**', 'const char**', 'size_t']],
  SessionOptionsSetLoadCancellationFlag: [293, P, [P, 'bool']],
  GetKeyValue: [297, STR, [P, STR]],
  ReleaseKeyValuePairs: [300, 'void', [P]],
  AllocatorGetStats: [319, P, [P, OUT]],
} as const satisfies Record<string, readonly [number, string, readonly string[]]>;

/** The functions of TABLE, as koffi functions (synchronous call, or `.async(..., cb)`). */
export type OrtApi = { readonly [K in keyof typeof TABLE]: KoffiFunction } & {
  /** onnxruntime's version string ("1.30.0"), from OrtApiBase. */
  readonly version: string;
};

/** Highest index we use: the part of the struct we read. */
const TABLE_LENGTH = Math.max(...Object.values(TABLE).map(([i]) => i)) + 1;

let api: OrtApi | undefined;

/** The API table, bound on first use (loads the library). Throws UNAVAILABLE when it cannot. */
export function ortApi(): OrtApi {
  if (api !== undefined) return api;
  const lib = loadOrtLibrary();
  const baseType = koffi.struct('OrtApiBase', { GetApi: P, GetVersionString: P });
  const base = koffi.decode(lib.func('void* OrtGetApiBase()')(), baseType) as { GetApi: Ptr; GetVersionString: Ptr };
  const version = koffi.call(base.GetVersionString, koffi.proto('const char* OrtGetVersionString()')) as string;
  const table = koffi.call(base.GetApi, koffi.proto('void* OrtGetApi(uint32_t)'), ORT_API_VERSION) as Ptr | null;
  if (table === null) {
    throw new UnavailableError(
      `onnxruntime ${version} does not provide C API version ${ORT_API_VERSION} (onnxruntime 1.${ORT_API_VERSION} or newer is needed)`,
    );
  }
  const slots = koffi.decode(table, koffi.array(P, TABLE_LENGTH)) as Ptr[];
  const bound: Record<string, unknown> = { version };
  for (const [name, [index, result, params]] of Object.entries(TABLE)) {
    bound[name] = koffi.decode(slots[index], koffi.proto(`Ort${name}`, result, [...params]));
  }
  api = bound as OrtApi;
  return api;
}

/** onnxruntime's OrtErrorCode names, by value (onnxruntime_c_api.h). */
const ORT_ERROR_CODES = [
  'ORT_OK',
  'ORT_FAIL',
  'ORT_INVALID_ARGUMENT',
  'ORT_NO_SUCHFILE',
  'ORT_NO_MODEL',
  'ORT_ENGINE_ERROR',
  'ORT_RUNTIME_EXCEPTION',
  'ORT_INVALID_PROTOBUF',
  'ORT_MODEL_LOADED',
  'ORT_NOT_IMPLEMENTED',
  'ORT_INVALID_GRAPH',
  'ORT_EP_FAIL',
  'ORT_MODEL_LOAD_CANCELED',
  'ORT_MODEL_REQUIRES_COMPILATION',
  'ORT_NOT_FOUND',
] as const;

/** An error status of onnxruntime, with its code; engines map it to Nereid's codes (errors.ts). */
export class OrtStatusError extends Error {
  readonly ortCode: string;
  constructor(ortCode: string, message: string) {
    super(message);
    this.name = 'OrtStatusError';
    this.ortCode = ortCode;
  }
}

/** Turns a returned OrtStatus* into an exception (and releases it); null means success. */
export function check(status: Status): void {
  if (status === null) return;
  throw statusError(status);
}

/** Reads and releases a non-null OrtStatus*. */
export function statusError(status: Ptr): OrtStatusError {
  const a = ortApi();
  const code = a.GetErrorCode(status) as number;
  const message = a.GetErrorMessage(status) as string;
  a.ReleaseStatus(status);
  return new OrtStatusError(ORT_ERROR_CODES[code] ?? `ORT_ERROR_${code}`, message);
}

/**
 * Calls a status-returning function on libuv's thread pool. Threading: the native call runs on a pool thread
 * and must touch only memory that stays referenced until the promise settles (the caller keeps its arguments);
 * the result is read on the JavaScript thread.
 */
export function callAsync(fn: KoffiFunction, ...args: unknown[]): Promise<void> {
  return new Promise((resolve, reject) => {
    fn.async(...args, (err: unknown, status: Status) => {
      if (err) reject(err instanceof Error ? err : new Error(String(err)));
      else if (status !== null) reject(statusError(status));
      else resolve();
    });
  });
}

/** Like callAsync for a void function (ReleaseSession: it joins the session's threads). */
export function callVoidAsync(fn: KoffiFunction, ...args: unknown[]): Promise<void> {
  return new Promise((resolve, reject) => {
    fn.async(...args, (err: unknown) =>
      err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve(),
    );
  });
}
