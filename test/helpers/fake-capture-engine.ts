import type { Backend, EngineAdapter, EngineLoadContext } from '../../src/backends/contract.js';
import { inProcessBackend } from '../../src/backends/runtime/inprocess.js';
import { planSession, usesCudaGraphs } from '../../src/backends/onnxruntime/options-capi.js';
import { autoCompleteOnnx } from '../../src/backends/onnxruntime/signature.js';
import type { OnnxruntimeBackendOptions } from '../../src/backends/onnxruntime/backend.js';

/** CUDA's message for a synchronous call during a global-mode capture, as onnxruntime's CUDA provider words it. */
export const CAPTURE_FAILURE =
  'CUDA failure 900: operation not permitted when stream is capturing ; GPU=0 ; hostname=fake ; file=cuda_execution_provider.cc ; line=1 ; expr=cudaStreamSynchronize(nullptr);';

/**
 * TEST DOUBLE of one GPU on which onnxruntime captures CUDA graphs in CUDA's global mode (this machine has no GPU;
 * the real collision is checked on the H200 with the GPU benchmark's model set). A capture lasts until a load or
 * run makes a synchronous CUDA call (or `holdMs`); a synchronous call while any capture is on fails with
 * error 900, as libcudart does. `outsideCaptures` makes that many syncs fail as if a capture the server cannot see
 * were on (another process's library, say).
 */
export class FakeCaptureGpu {
  capturing = 0;
  /** Every sync that met a capture, by who made it. */
  readonly collisions: string[] = [];
  /** Loads and runs in the order they happened: `capture:<model>`, `sync:<model>`, `run:<model>`. */
  readonly events: string[] = [];
  outsideCaptures = 0;
  readonly holdMs: number;
  #captureBegun!: () => void;
  readonly captureBegun = new Promise<void>((r) => (this.#captureBegun = r));
  /** Resolves the captures waiting for the next synchronous call. */
  #syncReached: Array<() => void> = [];

  constructor(holdMs = 300) {
    this.holdMs = holdMs;
  }

  async capture(model: string): Promise<void> {
    this.capturing++;
    this.events.push(`capture:${model}`);
    this.#captureBegun();
    await Promise.race([new Promise<void>((r) => this.#syncReached.push(r)), sleep(this.holdMs)]);
    this.capturing--;
  }

  sync(model: string, what = 'sync'): void {
    for (const r of this.#syncReached.splice(0)) r();
    this.events.push(`${what}:${model}`);
    if (this.capturing > 0 || this.outsideCaptures > 0) {
      if (this.outsideCaptures > 0) this.outsideCaptures--;
      this.collisions.push(`${what}:${model}`);
      throw new Error(`onnxruntime: ${CAPTURE_FAILURE}`);
    }
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * TEST DOUBLE of the onnxruntime engine on a GPU (both transports): a model with `enable_cuda_graph` captures in
 * its instance creation; any other instance's creation waits until a capture began (or `holdMs`), then makes a
 * synchronous CUDA call. Runs make one too and answer the `simple` model's sums and differences.
 */
export function fakeCaptureEngines(gpu: FakeCaptureGpu): NonNullable<OnnxruntimeBackendOptions['engines']> {
  return (descriptor) => {
    const adapter: EngineAdapter = {
      load: (ctx: EngineLoadContext) => {
        const captures = usesCudaGraphs(planSession(ctx.config, ctx.backendConfig));
        return Promise.resolve({
          createInstance: async () => {
            if (captures) {
              await gpu.capture(ctx.name);
            } else {
              await Promise.race([gpu.captureBegun, sleep(gpu.holdMs)]);
              gpu.sync(ctx.name);
            }
            return {
              execute: (requests, responder) => {
                gpu.sync(ctx.name, 'run');
                requests.forEach((r, i) => {
                  const [a, b] = r.inputs.map((t) => t.data as Int32Array);
                  const outputs = r.outputs.map((name) => ({
                    name,
                    datatype: 'INT32' as const,
                    shape: [...r.inputs[0].shape],
                    data: a.map((x, k) => (name === 'OUTPUT0' ? x + b[k] : x - b[k])),
                  }));
                  responder.send(i, { outputs }, { final: true });
                });
                return Promise.resolve({ computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 });
              },
              destroy: () => Promise.resolve(),
            };
          },
          unload: () => Promise.resolve(),
        });
      },
    };
    const backend = (): Backend =>
      inProcessBackend(
        {
          ...descriptor,
          async autoComplete(config, ctx) {
            return (await autoCompleteOnnx(config, ctx)).config;
          },
        },
        adapter,
      );
    return { inProcess: backend(), threaded: backend() };
  };
}
