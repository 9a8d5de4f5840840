import type { Backend, EngineLoadContext } from '../contract.js';
import { inProcessBackend } from '../runtime/inprocess.js';
import { withThreadTransport } from '../runtime/transport.js';
import { workerBackend } from '../runtime/worker/host.js';
import { adapterUrl } from '../runtime/worker/spawn.js';
import { onnxruntimeCapiAdapter } from './engine.js';
import { onnxruntimeDescriptor } from './descriptor.js';
import { planSession, usesCudaGraphs } from './options-capi.js';
import { autoCompleteOnnx } from './signature.js';
import { gatedOnDevice } from './gated.js';

/** Whether the model's sessions replay CUDA graphs; a config the plan refuses is left to the load to report. */
function graphsOf(ctx: EngineLoadContext): boolean {
  try {
    return usesCudaGraphs(planSession(ctx.config, ctx.backendConfig));
  } catch {
    return false;
  }
}

/**
 * The plan's warnings, logged once per model load on the host: on the engine-thread transport every instance's
 * thread plans its own session, and one warning per instance would repeat the same sentence. A config the plan
 * refuses is left to the load to report.
 */
function warnPlanOnce(ctx: Parameters<Backend['load']>[0]): void {
  let warnings: readonly string[];
  try {
    warnings = planSession(ctx.config, ctx.backendConfig).warnings;
  } catch {
    return;
  }
  for (const w of warnings) ctx.logger.warn({ model: ctx.name, version: ctx.version }, w);
}

/**
 * The onnxruntime backend: Triton's `onnxruntime` backend / `onnxruntime_onnx` platform over onnxruntime's C API.
 *
 * Two transports (`--backend-config=onnxruntime,transport=inprocess|thread`):
 * - `inprocess` (default): sessions run on libuv's thread pool (koffi async calls), so no engine thread and no
 *   per-request message hop; the event loop never waits for a run.
 * - `thread`: each instance in a worker thread of its own that calls Run itself (blocking that thread only): one
 *   message each way per batch, but every run of an instance comes from the same thread.
 * A model whose sessions replay CUDA graphs (`enable_cuda_graph`) loads on `thread`: the copies into the graphs'
 * fixed device buffers run on the instance's own thread (capi/cuda-graphs.ts). Auto-complete always runs in-process
 * (it reads the model's signature, no run). KIND_GPU instances of both transports pass their device's gate
 * (gated.ts): a model that captures CUDA graphs at load is created alone on its GPU.
 *
 * `engines` (tests): TEST DOUBLES of the two transports' engines, behind this backend's descriptor, transport
 * choice and device gate (a machine without a GPU cannot create the real KIND_GPU sessions).
 */
export function onnxruntimeBackend(
  engines?: (descriptor: ReturnType<typeof onnxruntimeDescriptor>) => { inProcess: Backend; threaded: Backend },
): Backend {
  const descriptor = onnxruntimeDescriptor();
  if (engines !== undefined) {
    const e = engines(descriptor);
    return gatedOnDevice(withThreadTransport('onnxruntime', e.inProcess, e.threaded, graphsOf), graphsOf);
  }
  const inProcess = inProcessBackend(
    {
      ...descriptor,
      async autoComplete(config, ctx) {
        const { config: completed, warnings } = await autoCompleteOnnx(config, ctx);
        for (const w of warnings) ctx.logger.warn({ model: ctx.modelName }, w);
        return completed;
      },
    },
    onnxruntimeCapiAdapter(),
  );
  const worker = workerBackend(descriptor, adapterUrl(import.meta.url, './thread-adapter'));
  const threaded: Backend = {
    ...worker,
    load(ctx, signal) {
      warnPlanOnce(ctx);
      return worker.load(ctx, signal);
    },
  };
  return gatedOnDevice(withThreadTransport('onnxruntime', inProcess, threaded, graphsOf), graphsOf);
}
