import type { Backend, EngineResponse, Instance, InstanceSpec, ModelHandle } from '../../src/backends/contract.js';
import type { ModelConfig } from '../../src/config/model-config.js';
import { noopLogger } from '../../src/core/logger.js';
import type { Tensor } from '../../src/core/tensor.js';
import { finalizeConfig } from '../../src/config/model-config.js';

/** Direct use of a backend in unit tests: load a model, create instances, run one request at a time. */

export interface LoadedForTest {
  handle: ModelHandle;
  instances: Instance[];
  close(): Promise<void>;
}

export function cpuSpecs(name: string, n: number): InstanceSpec[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `${name}_${i}`,
    index: i,
    kind: 'KIND_CPU',
    device: -1,
    profiles: [],
  }));
}

export async function loadForTest(
  backend: Backend,
  opts: {
    name?: string;
    config?: ModelConfig;
    modelPath: string;
    modelDir?: string;
    backendConfig?: Record<string, string>;
    instances?: number;
  },
): Promise<LoadedForTest> {
  const name = opts.name ?? 'm';
  const handle = await backend.load({
    name,
    version: 1,
    config: finalizeConfig(opts.config ?? {}, name),
    modelDir: opts.modelDir ?? '',
    modelPath: opts.modelPath,
    backendConfig: opts.backendConfig ?? {},
    logLevel: 'silent',
    logger: noopLogger,
  });
  const instances = await Promise.all(cpuSpecs(name, opts.instances ?? 1).map((s) => handle.createInstance(s)));
  let closing: Promise<void> | undefined;
  return {
    handle,
    instances,
    close: () => (closing ??= Promise.all(instances.map((i) => i.destroy())).then(() => handle.unload())),
  };
}

/** Runs one request on `instance` and returns its response (or throws its error) with the batch timings. */
export async function executeOne(
  instance: Instance,
  request: { inputs: Tensor[]; outputs: string[]; batchSize?: number },
  signal: AbortSignal = new AbortController().signal,
): Promise<EngineResponse & { timings: Awaited<ReturnType<Instance['execute']>> }> {
  let response: EngineResponse | undefined;
  let error: Error | undefined;
  const timings = await instance.execute(
    [
      {
        inputs: request.inputs,
        outputs: request.outputs,
        batchSize: request.batchSize ?? request.inputs[0]?.shape[0] ?? 1,
      },
    ],
    {
      send(_i, r) {
        if (r instanceof Error) error = r;
        else if (r !== null) response = r;
      },
    },
    signal,
  );
  if (error !== undefined) throw error;
  if (response === undefined) throw new Error('no response');
  return { ...response, timings };
}
