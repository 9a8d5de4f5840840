/** The onnxruntime backend (the only importer of onnxruntime-node, which it loads in worker threads only). */
export { onnxruntimeBackend, resolveModelFile } from './backend.js';
export { OrtInstance } from './instance.js';
export { checkAccelerators, instanceCount, sessionOptionsFor } from './options.js';
export type { MappedOptions, OrtRunOptions, OrtSessionOptions } from './options.js';
