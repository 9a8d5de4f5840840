import { existsSync, readdirSync } from 'node:fs';
import { join, posix } from 'node:path';
import type { ModelConfig } from '../../config/model-config.js';
import type { BackendDescriptor, InstanceKind } from '../contract.js';
import { ortLibraryDir } from './capi/library.js';
import { externalDataLocations } from './external-data.js';
import { ALL_DATATYPES, type DataType } from '../../core/datatypes.js';
import { DEFAULT_MODEL_FILENAME } from './signature.js';
import { ONNXRUNTIME_SETTINGS } from './settings.js';

/** Every datatype onnxruntime's C API carries (BF16 too: raw bits, unlike onnxruntime-node's JS API). */
export const ORT_CAPI_DATATYPES: readonly DataType[] = ALL_DATATYPES;

/**
 * True when a KIND_GPU instance could run here: the CUDA provider libraries sit beside libonnxruntime and the
 * NVIDIA driver lists a GPU. Cheap (no CUDA call); the session itself is the real test.
 */
export function gpuUsable(): boolean {
  try {
    const dir = ortLibraryDir();
    const libs = ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'];
    return libs.every((f) => existsSync(join(dir, f))) && readdirSync('/proc/driver/nvidia/gpus').length > 0;
  } catch {
    return false;
  }
}

/** `path` (relative to the model folder: `1/model.onnx`) is an ONNX model: by its name, or the config's file name. */
function isOnnxFile(path: string, config: ModelConfig | undefined): boolean {
  if (path.endsWith('.onnx')) return true;
  const file = config?.default_model_filename;
  return file !== undefined && file !== '' && posix.relative(path.split('/')[0], path) === file;
}

/** The descriptor for the in-process onnxruntime backend (`inProcessBackend(descriptor, adapter)`). */
export function onnxruntimeDescriptor(): BackendDescriptor & {
  kinds: readonly InstanceKind[];
  defaultCpuInstanceCount: number;
} {
  return {
    name: 'onnxruntime',
    platforms: ['onnxruntime_onnx'],
    defaultModelFilename: DEFAULT_MODEL_FILENAME,
    datatypes: ORT_CAPI_DATATYPES,
    sections: [],
    // KIND_AUTO takes the first: GPU where one is usable (Triton's rule). KIND_GPU stays accepted elsewhere so
    // that its load fails with the engine's reason (the missing library, no device) instead of a generic refusal.
    kinds: gpuUsable() ? ['KIND_GPU', 'KIND_CPU'] : ['KIND_CPU', 'KIND_GPU'],
    // Triton's onnxruntime backend: a KIND_CPU group without a count has 2 instances.
    defaultCpuInstanceCount: 2,
    settings: ONNXRUNTIME_SETTINGS,
    // An ONNX file may keep tensors in files beside it (external data), which onnxruntime opens by their paths.
    referencedFiles: (path, content, config) => (isOnnxFile(path, config) ? externalDataLocations(content) : undefined),
  };
}
