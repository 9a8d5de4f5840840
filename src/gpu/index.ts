/**
 * GPU support that is not an engine: NVML (driver, devices, readings), and onnxruntime's GPU provider libraries
 * (where they belong, whether they load, what is missing and how to get it). Imports only core/, so metrics/,
 * backends/ and cli/ may all use it. The `nereid gpu` command itself is in command.ts, loaded by the CLI on demand.
 */
export { providerStatus, adviseMissing, type Advice, type ProviderStatus } from './diagnose.js';
export { remedyFor, type Remedy } from './deps.js';
export { Nvml, NvmlError, type DriverInfo, type GpuDevice, type GpuReading, type NvmlUnavailable } from './nvml.js';
export { NVML_LIBRARY, NVML_LIBRARY_ENV } from './nvml-koffi.js';
export { ORT_LIB_DIR_ENV, PROVIDER_FILES, onnxruntimeNode, providerDir, type ProviderRole } from './providers.js';
export { visibleDevices } from './visible.js';
export { cudaDeviceIds } from './detect.js';
