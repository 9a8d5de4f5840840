import { onnxruntimeCapiAdapter } from './engine.js';

/**
 * The onnxruntime engine as the engine-thread transport loads it (`--backend-config=onnxruntime,transport=thread`):
 * each instance lives in a worker thread of its own, so its runs block that thread (Run on the calling thread)
 * instead of hopping to libuv's pool — every run of an instance comes from the same thread. The plan's warnings are
 * the host's to log, once per load (backend.ts), not once per instance thread.
 */
export const adapter = onnxruntimeCapiAdapter({ blockingRuns: true, planWarnings: false });
