import type { Backend } from '../contract.js';
import { inProcessBackend } from '../runtime/inprocess.js';
import { autoCompleteOnnx, onnxruntimeCapiAdapter, onnxruntimeDescriptor } from './engine.js';

/**
 * The onnxruntime backend: Triton's `onnxruntime` backend / `onnxruntime_onnx` platform over onnxruntime's C API,
 * in-process: sessions run on libuv's thread pool (koffi async calls), so no engine thread and no per-request
 * message hop; the event loop never waits for a run.
 */
export function onnxruntimeBackend(): Backend {
  return inProcessBackend(
    {
      ...onnxruntimeDescriptor(),
      async autoComplete(config, ctx) {
        const { config: completed, warnings } = await autoCompleteOnnx(config, ctx);
        for (const w of warnings) ctx.logger.warn({ model: ctx.modelName }, w);
        return completed;
      },
    },
    onnxruntimeCapiAdapter(),
  );
}
