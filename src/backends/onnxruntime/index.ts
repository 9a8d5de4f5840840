/** The onnxruntime backend (the only user of onnxruntime's library, through its C API). */
export { onnxruntimeBackend } from './backend.js';
export { resolveModelFile } from './signature.js';
