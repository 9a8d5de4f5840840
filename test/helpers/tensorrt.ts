import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseModelConfigOrThrow } from '../../src/config/index.js';
import type { ModelConfig } from '../../src/config/model-config.js';
import { noopLogger, type Logger } from '../../src/core/logger.js';
import type { Tensor } from '../../src/core/tensor.js';
import type {
  Backend,
  BackendConfig,
  EngineRequest,
  EngineResponse,
  Instance,
  InstanceSpec,
  ModelHandle,
  Responder,
} from '../../src/backends/contract.js';
import { tensorrtBackend } from '../../src/backends/tensorrt/index.js';
import { finalizeConfig } from '../../src/config/model-config.js';

/**
 * Plans for the TEST DOUBLE of TensorRT (test/fixtures/tensorrt/double: JSON plans, host memory as device
 * memory) and loading them straight through the tensorrt backend, with the double first on the engine process's
 * PYTHONPATH. Not TensorRT: what runs on real TensorRT is scripts/gpu/tensorrt-on-device.sh.
 */

export const DOUBLE = fileURLToPath(new URL('../fixtures/tensorrt/double/', import.meta.url));
const VENV_PYTHON = fileURLToPath(new URL('../../.venv/bin/python', import.meta.url));
/** The interpreter the backend picks without a setup record: the repository .venv, else python3. */
export const PYTHON = existsSync(VENV_PYTHON) ? VENV_PYTHON : 'python3';
export const MAGIC = 'NEREID-FAKE-TRT-PLAN\n';

export interface FakeTensor {
  name: string;
  mode: 'INPUT' | 'OUTPUT';
  dtype: string;
  shape: number[];
}

export interface FakePlan {
  io: FakeTensor[];
  profiles: Record<string, [number[], number[], number[]]>[];
  compute: Record<string, { op: string; args: string[] }>;
  version_compatible?: boolean;
  requires_library?: string;
  device_memory?: number;
  per_profile?: number[];
  sleep_ms?: number;
  /** The TensorRT version that "built" it (the double refuses a plan of another major version, as TensorRT). */
  trt_version?: string;
}

/**
 * FP32 inputs INPUT0, INPUT1 [-1,width] and one output OUTPUT0 = their sum; one profile, batch 1..8 (opt 4), whose
 * context takes `deviceBytes` of "device" memory.
 */
export function sumPlan(width: number, deviceBytes: number): FakePlan {
  const t = (name: string, mode: 'INPUT' | 'OUTPUT') => ({ name, mode, dtype: 'FLOAT', shape: [-1, width] });
  const range: [number[], number[], number[]] = [
    [1, width],
    [4, width],
    [8, width],
  ];
  return addSubPlan({
    io: [t('INPUT0', 'INPUT'), t('INPUT1', 'INPUT'), t('OUTPUT0', 'OUTPUT')],
    profiles: [{ INPUT0: range, INPUT1: range }],
    compute: { OUTPUT0: { op: 'add', args: ['INPUT0', 'INPUT1'] } },
    per_profile: [deviceBytes],
  });
}

/** Two FP32 inputs [-1,4], OUTPUT0 = sum, OUTPUT1 = difference; profile 0 batch 1..8 (opt 4), profile 1 1..32 (opt 16). */
export function addSubPlan(over: Partial<FakePlan> = {}): FakePlan {
  const t = (name: string, mode: 'INPUT' | 'OUTPUT'): FakeTensor => ({ name, mode, dtype: 'FLOAT', shape: [-1, 4] });
  return {
    io: [t('INPUT0', 'INPUT'), t('INPUT1', 'INPUT'), t('OUTPUT0', 'OUTPUT'), t('OUTPUT1', 'OUTPUT')],
    profiles: [
      {
        INPUT0: [
          [1, 4],
          [4, 4],
          [8, 4],
        ],
        INPUT1: [
          [1, 4],
          [4, 4],
          [8, 4],
        ],
      },
      {
        INPUT0: [
          [1, 4],
          [16, 4],
          [32, 4],
        ],
        INPUT1: [
          [1, 4],
          [16, 4],
          [32, 4],
        ],
      },
    ],
    compute: { OUTPUT0: { op: 'add', args: ['INPUT0', 'INPUT1'] }, OUTPUT1: { op: 'sub', args: ['INPUT0', 'INPUT1'] } },
    device_memory: 64 << 20,
    per_profile: [8 << 20, 64 << 20],
    ...over,
  };
}

/** The seed's shape: three INT32 inputs [-1,16] (batch 1..32, opt 16), one FP32 output. */
export function seedPlan(): FakePlan {
  const i = (name: string): FakeTensor => ({ name, mode: 'INPUT', dtype: 'INT32', shape: [-1, 16] });
  const range: [number[], number[], number[]] = [
    [1, 16],
    [16, 16],
    [32, 16],
  ];
  return {
    io: [
      i('input_ids'),
      i('attention_mask'),
      i('token_type_ids'),
      { name: 'outputs', mode: 'OUTPUT', dtype: 'FLOAT', shape: [-1, 16] },
    ],
    profiles: [{ input_ids: range, attention_mask: range, token_type_ids: range }],
    compute: { outputs: { op: 'add', args: ['input_ids', 'attention_mask'] } },
  };
}

export function planBytes(plan: FakePlan): Buffer {
  return Buffer.concat([Buffer.from(MAGIC), Buffer.from(JSON.stringify(plan))]);
}

/** A repository folder `<tmp>/<name>/1/model.plan` (+ config.pbtxt when given). */
export function writeModel(
  name: string,
  plan: FakePlan | Buffer,
  configText?: string,
): { dir: string; root: string; planPath: string } {
  const root = mkdtempSync(join(tmpdir(), 'nereid-trt-'));
  const dir = join(root, name);
  mkdirSync(join(dir, '1'), { recursive: true });
  const planPath = join(dir, '1', 'model.plan');
  writeFileSync(planPath, Buffer.isBuffer(plan) ? plan : planBytes(plan));
  if (configText !== undefined) writeFileSync(join(dir, 'config.pbtxt'), configText);
  return { dir, root, planPath };
}

export function removeModel(root: string): void {
  rmSync(root, { recursive: true, force: true });
}

export function config(text: string): ModelConfig {
  return parseModelConfigOrThrow(text, 'config.pbtxt');
}

/** The double's event log (one JSON object per line). */
export interface DoubleEvent {
  ev: string;
  pid: number;
  tid: number;
  t: number;
  [k: string]: unknown;
}

export function readEvents(file: string): DoubleEvent[] {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as DoubleEvent);
}

export function doubleBackend(env: Record<string, string> = {}): Backend {
  return tensorrtBackend({ pythonPath: [DOUBLE], env });
}

export interface LoadedTrt {
  backend: Backend;
  handle: ModelHandle;
  config: ModelConfig;
  instance(spec?: Partial<InstanceSpec>): Promise<Instance & { pid: number }>;
}

/** Auto-completes `cfg` from the plan, then loads it (what the repository does, without a server). */
export async function loadTrt(
  planPath: string,
  dir: string,
  cfg: ModelConfig,
  opts: { backendConfig?: BackendConfig; env?: Record<string, string>; logger?: Logger; autoComplete?: boolean } = {},
): Promise<LoadedTrt> {
  const backend = doubleBackend(opts.env);
  const logger = opts.logger ?? noopLogger;
  // Built apart from the call: the context gains `modelName` on main's contract; a variable passes on both.
  const acx = {
    modelName: cfg.name ?? 'm',
    modelPath: planPath,
    backendConfig: opts.backendConfig ?? {},
    autoComplete: opts.autoComplete ?? true,
    logger,
  };
  const completed = await backend.autoComplete(cfg, acx);
  const handle = await backend.load({
    name: completed.name ?? 'm',
    version: 1,
    config: finalizeConfig(completed, completed.name ?? 'm'),
    modelDir: dir,
    modelPath: planPath,
    backendConfig: opts.backendConfig ?? {},
    logLevel: 'info',
    logger,
  });
  let n = 0;
  return {
    backend,
    handle,
    config: completed,
    async instance(spec: Partial<InstanceSpec> = {}) {
      const index = n++;
      const inst = await handle.createInstance({
        name: `${completed.name}_${index}`,
        index,
        kind: 'KIND_GPU',
        device: 0,
        profiles: [],
        ...spec,
      });
      return inst as Instance & { pid: number };
    },
  };
}

export function fp32(name: string, rows: number[][]): Tensor {
  return { name, datatype: 'FP32', shape: [rows.length, rows[0]?.length ?? 0], data: Float32Array.from(rows.flat()) };
}

export function int32(name: string, rows: number[][]): Tensor {
  return { name, datatype: 'INT32', shape: [rows.length, rows[0]?.length ?? 0], data: Int32Array.from(rows.flat()) };
}

export function request(inputs: Tensor[], outputs: string[]): EngineRequest {
  return { inputs, outputs, batchSize: inputs[0]?.shape[0] ?? 1 };
}

export interface Recorded {
  sent: { index: number; response: EngineResponse | Error | null; final: boolean }[];
  final(index: number): EngineResponse | Error | null | undefined;
}

export function recorder(): Responder & Recorded {
  const sent: Recorded['sent'] = [];
  return {
    sent,
    send(index, response, opts) {
      sent.push({ index, response, final: opts.final });
    },
    final(index) {
      return sent.find((s) => s.index === index && s.final)?.response;
    },
  };
}

export function output(r: EngineResponse | Error | null | undefined, name: string): Tensor {
  if (r === null || r === undefined || r instanceof Error) throw new Error(`no response: ${String(r)}`);
  const t = r.outputs.find((o) => o.name === name);
  if (t === undefined) throw new Error(`no output ${name}`);
  return t;
}
