import type { ModelConfig } from '../../src/config/model-config.js';
import type { Logger } from '../../src/core/logger.js';
import type { Tensor } from '../../src/core/tensor.js';
import type {
  BackendConfig,
  EngineRequest,
  EngineResponse,
  InstanceKind,
  Responder,
} from '../../src/backends/contract.js';
import { onnxruntimeCapiAdapter, type CapiInstance } from '../../src/backends/onnxruntime/engine.js';

/**
 * Helpers for the C API engine's tests (not shipped code paths): load a model file with a config, create
 * instances, collect responses.
 */

export const adapter = onnxruntimeCapiAdapter();
const blockingAdapter = onnxruntimeCapiAdapter({ blockingRuns: true });

export interface Opened {
  model: Awaited<ReturnType<typeof adapter.load>>;
  instances: CapiInstance[];
  close(): Promise<void>;
}

export async function open(
  modelPath: string,
  config: ModelConfig,
  opts: {
    backendConfig?: BackendConfig;
    kind?: InstanceKind;
    device?: number;
    count?: number;
    logLevel?: string;
    optimizedModelPrefix?: string;
    /** Run on the calling thread, as the engine-thread transport does (CUDA graphs need it). */
    blocking?: boolean;
    /** The engine's logger (its debug lines: the providers' options as onnxruntime holds them). */
    logger?: Logger;
  } = {},
): Promise<Opened> {
  const signal = new AbortController().signal;
  const model = await (opts.blocking === true ? blockingAdapter : adapter).load(
    {
      name: 'm',
      version: 1,
      config,
      modelDir: modelPath,
      modelPath,
      backendConfig: opts.backendConfig ?? {},
      logLevel: opts.logLevel ?? 'info',
      ...(opts.optimizedModelPrefix === undefined ? {} : { optimizedModelPrefix: opts.optimizedModelPrefix }),
      ...(opts.logger === undefined ? {} : { logger: opts.logger }),
    } as Parameters<typeof adapter.load>[0],
    signal,
  );
  const instances: CapiInstance[] = [];
  try {
    for (let i = 0; i < (opts.count ?? 1); i++) {
      const spec = { name: `m_${i}`, index: i, kind: opts.kind ?? 'KIND_CPU', device: opts.device ?? -1, profiles: [] };
      instances.push((await model.createInstance(spec, signal)) as CapiInstance);
    }
  } catch (err) {
    await model.unload();
    throw err;
  }
  return {
    model,
    instances,
    async close() {
      for (const i of instances) await i.destroy();
      await model.unload();
    },
  };
}

export const params = (p: Record<string, string>): ModelConfig['parameters'] =>
  Object.fromEntries(Object.entries(p).map(([k, v]) => [k, { string_value: v }]));

export function request(inputs: Tensor[], outputs: string[], batchSize = inputs[0]?.shape[0] ?? 1): EngineRequest {
  return { inputs, outputs, batchSize };
}

/** A Responder that keeps what each request got. */
export class Collected implements Responder {
  readonly got = new Map<number, EngineResponse | Error | null>();
  readonly finals = new Set<number>();
  send(index: number, response: EngineResponse | Error | null, opts: { final: boolean }): void {
    if (this.finals.has(index)) return;
    this.got.set(index, response);
    if (opts.final) this.finals.add(index);
  }
  response(i: number): EngineResponse {
    const r = this.got.get(i);
    if (r === undefined || r === null || r instanceof Error)
      throw new Error(`request ${i}: no response (${String(r)})`);
    return r;
  }
}

export const never = (): AbortSignal => new AbortController().signal;
