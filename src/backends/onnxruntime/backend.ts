import { InvalidArgError } from '../../core/errors.js';
import type { Backend, EngineLoadContext, InstanceSpec } from '../contract.js';
import type { OutputPool, OutputPoolStats } from './capi/output-pool.js';
import { DEFAULT_PINNED_POOL_BYTES, DevicePools } from './device-pools.js';
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
 * KIND_GPU instances in-process write their outputs into their device's page-locked pool (device-pools.ts) and
 * lend them to HTTP binary responses (capi/pooled-responses.ts).
 */
export interface OnnxruntimeBackendOptions {
  /** `--pinned-memory-pool-byte-size`: page-locked output memory per GPU (default 256 MiB, Triton's; 0: none). */
  pinnedMemoryPoolBytes?: number;
  /** Tests: an in-process instance's output pool instead of its device's (a pool over a TEST DOUBLE, on KIND_CPU). */
  outputPoolFor?: (spec: InstanceSpec) => OutputPool | undefined;
  /**
   * Tests: TEST DOUBLES of the two transports' engines, behind this backend's descriptor, transport choice and
   * device gate (a machine without a GPU cannot create the real KIND_GPU sessions).
   */
  engines?: (descriptor: ReturnType<typeof onnxruntimeDescriptor>) => { inProcess: Backend; threaded: Backend };
}

/** The backend, with its pools' statistics for the metrics. */
export type OnnxruntimeBackend = Backend & { pinnedPoolStats(): OutputPoolStats };

export function onnxruntimeBackend(opts: OnnxruntimeBackendOptions = {}): OnnxruntimeBackend {
  const descriptor = onnxruntimeDescriptor();
  const poolBytes = opts.pinnedMemoryPoolBytes ?? DEFAULT_PINNED_POOL_BYTES;
  if (!Number.isSafeInteger(poolBytes) || poolBytes < 0) {
    throw new InvalidArgError(`--pinned-memory-pool-byte-size must be 0 or a positive integer, got ${poolBytes}`);
  }
  const pools = new DevicePools(poolBytes);
  const finish = (inProcess: Backend, threaded: Backend): OnnxruntimeBackend => ({
    ...gatedOnDevice(withThreadTransport('onnxruntime', inProcess, threaded, graphsOf), graphsOf),
    pinnedPoolStats: () => pools.stats(),
    close: () => {
      pools.close();
      return Promise.resolve();
    },
  });
  if (opts.engines !== undefined) {
    const e = opts.engines(descriptor);
    return finish(e.inProcess, e.threaded);
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
    onnxruntimeCapiAdapter({ outputPool: opts.outputPoolFor ?? ((spec) => pools.forInstance(spec)) }),
  );
  const worker = workerBackend(descriptor, adapterUrl(import.meta.url, './thread-adapter'));
  const threaded: Backend = {
    ...worker,
    load(ctx, signal) {
      warnPlanOnce(ctx);
      return worker.load(ctx, signal);
    },
  };
  return finish(inProcess, threaded);
}
