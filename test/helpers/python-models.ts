import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, afterEach } from 'node:test';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseModelConfigOrThrow } from '../../src/config/index.js';
import type { ModelConfig } from '../../src/config/model-config.js';
import { noopLogger, type Logger } from '../../src/core/logger.js';
import type { Tensor } from '../../src/core/tensor.js';
import type {
  BackendConfig,
  EngineRequest,
  EngineResponse,
  Instance,
  ModelHandle,
  Responder,
} from '../../src/backends/contract.js';
import { pythonBackend, type PythonBackend } from '../../src/backends/python/index.js';
import type { ModelCaller } from '../../src/backends/python/bls.js';
import { finalizeConfig } from '../../src/config/model-config.js';

/** Test models of the python backend (test/fixtures/python) and the example add_sub, loaded straight through the
 * backend (no server): what the runtime will do, in a few lines. */

export const FIXTURES = fileURLToPath(new URL('../fixtures/python/', import.meta.url));
/** The Python example repository (add_sub), apart from examples/model_repository so that serving that one needs
 * no Python. */
export const EXAMPLES = fileURLToPath(new URL('../../examples/python_repository/', import.meta.url));

export function fixtureConfig(dir: string): ModelConfig {
  const file = join(dir, 'config.pbtxt');
  return parseModelConfigOrThrow(readFileSync(file, 'utf8'), file);
}

export interface Loaded {
  backend: PythonBackend;
  handle: ModelHandle;
  config: ModelConfig;
  instance(index?: number): Promise<Instance & { pid: number }>;
}

export async function loadPython(
  name: string,
  opts: {
    dir?: string;
    backendConfig?: BackendConfig;
    caller?: ModelCaller;
    logger?: Logger;
    config?: ModelConfig;
  } = {},
): Promise<Loaded> {
  const dir = join(opts.dir ?? FIXTURES, name);
  const config = opts.config ?? fixtureConfig(dir);
  const backend = pythonBackend({ caller: opts.caller });
  const handle = await backend.load({
    name,
    version: 1,
    config: finalizeConfig(config, name),
    modelDir: dir,
    modelPath: join(dir, '1', 'model.py'),
    backendConfig: opts.backendConfig ?? {},
    logLevel: 'info',
    logger: opts.logger ?? noopLogger,
  });
  return {
    backend,
    handle,
    config,
    instance: async (index = 0) =>
      (await handle.createInstance({
        name: `${name}_${index}`,
        index,
        kind: 'KIND_CPU',
        device: -1,
        profiles: [],
      })) as Instance & {
        pid: number;
      },
  };
}

export interface Sent {
  index: number;
  response: EngineResponse | Error | null;
  final: boolean;
}

/** A responder that records every send; `allFinal(n)` settles once n requests had their final response. */
export function recorder(): Responder & {
  sent: Sent[];
  finals(): Map<number, EngineResponse | Error | null>;
  allFinal(n: number): Promise<void>;
} {
  const sent: Sent[] = [];
  let waiter: { n: number; resolve: () => void } | undefined;
  const finalCount = (): number => sent.filter((s) => s.final).length;
  return {
    sent,
    send(index, response, { final }) {
      sent.push({ index, response, final });
      if (waiter !== undefined && finalCount() >= waiter.n) waiter.resolve();
    },
    allFinal(n) {
      if (finalCount() >= n) return Promise.resolve();
      return new Promise((resolve) => (waiter = { n, resolve }));
    },
    finals() {
      const m = new Map<number, EngineResponse | Error | null>();
      for (const s of sent) if (s.final) m.set(s.index, s.response);
      return m;
    },
  };
}

export function fp32(name: string, values: number[], shape = [values.length]): Tensor {
  return { name, datatype: 'FP32', shape, data: Float32Array.from(values) };
}

export function request(inputs: Tensor[], outputs: string[], extra: Partial<EngineRequest> = {}): EngineRequest {
  return { inputs, outputs, batchSize: 1, ...extra };
}

export function outputOf(r: EngineResponse | Error | null | undefined, name: string): Tensor {
  if (r === null || r === undefined || r instanceof Error) throw new Error(`expected outputs, got ${String(r)}`);
  const t = r.outputs.find((o) => o.name === name);
  if (t === undefined) throw new Error(`no output ${name}`);
  return t;
}

/**
 * `loadPython` for a test file whose models are unloaded after each test, and which fails at the end if any
 * shared-memory segment of this process's stubs outlived them.
 */
export function trackedLoads(): (...args: Parameters<typeof loadPython>) => Promise<Loaded> {
  const opened: Loaded[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((m) => m.handle.unload()));
  });
  after(() => {
    const left = readdirSync('/dev/shm').filter((n) => n.startsWith(`nereid_python_${process.pid}x`));
    assert.deepEqual(left, [], 'no shared-memory segment outlives its process');
  });
  return async (...args) => {
    const m = await loadPython(...args);
    opened.push(m);
    return m;
  };
}
