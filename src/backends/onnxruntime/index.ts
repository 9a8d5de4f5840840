/** The onnxruntime backend (the only importer of onnxruntime-node, which it loads in engine threads only). */
export { onnxruntimeBackend } from './backend.js';
export { resolveModelFile } from './adapter.js';
export { checkAccelerators, instanceCount, sessionOptionsFor } from './options.js';
export type { MappedOptions, OrtRunOptions, OrtSessionOptions } from './options.js';
