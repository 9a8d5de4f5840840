import type { Backend } from '../contract.js';
import { workerBackend } from '../runtime/worker/host.js';
import { adapterUrl } from '../runtime/worker/spawn.js';
import { DEFAULT_MODEL_FILENAME } from './adapter.js';
import { ORT_DATATYPES } from './datatypes.js';
import { checkAccelerators, sessionOptionsFor } from './options.js';

/**
 * The onnxruntime backend: Triton's `onnxruntime` backend / `onnxruntime_onnx` platform on onnxruntime-node (CPU
 * execution provider), each instance an engine thread of its own (worker transport) with one session.
 */
export function onnxruntimeBackend(): Backend {
  const base = workerBackend(
    {
      name: 'onnxruntime',
      platforms: ['onnxruntime_onnx'],
      defaultModelFilename: DEFAULT_MODEL_FILENAME,
      datatypes: ORT_DATATYPES,
      sections: [],
      kinds: ['KIND_CPU'],
      defaultCpuInstanceCount: 2,
    },
    adapterUrl(import.meta.url, './adapter'),
  );
  return {
    ...base,
    // Options are checked (and their warnings logged) on the main thread before any thread starts.
    async load(ctx, signal) {
      checkAccelerators(ctx.config);
      const mapped = sessionOptionsFor(ctx.config, ctx.backendConfig);
      for (const w of mapped.warnings) ctx.logger.warn({ model: ctx.name, version: ctx.version }, w);
      return base.load(ctx, signal);
    },
  };
}
