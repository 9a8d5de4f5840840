import { randomFillSync } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { EngineRequest, Instance } from '../backends/contract.js';
import type { NormalizedConfig } from '../config/model-config.js';
import { DATATYPES, dataTypeFromConfig, type DataType } from '../core/datatypes.js';
import { InvalidArgError, NereidError } from '../core/errors.js';
import { decodeBytes, viewFixed, type Tensor, type TensorData } from '../core/tensor.js';
import { scheduledInputNames } from '../config/sequence-names.js';

/**
 * Triton's model warm-up: synthetic requests (`model_warmup`) run on every instance before the model version is
 * READY, so the first client does not pay for lazy initialization. A sample of `batch_size` n is n requests of
 * batch 1 executed together as one batch, `count` times (at least once); batch_size 0 skips the sample. Data is
 * zeros, random bytes, or a file in `<model>/warmup/`. A failing sample fails the load, naming it. Warm-up goes
 * straight to the instances: it is not counted in the model's statistics.
 */

/** Folder of a model holding `input_data_file` files (Triton's `warmup/`). */
export const WARMUP_FOLDER = 'warmup';

interface SampleInput {
  readonly name: string;
  readonly datatype: DataType;
  /** Shape of one request's input (batch dim of 1 included when the model batches). */
  readonly shape: readonly number[];
  readonly kind: 'zero' | 'random' | 'file';
  /** The file's data (kind 'file'). */
  readonly data?: TensorData;
}

export interface WarmupSample {
  readonly name: string;
  readonly batchSize: number;
  readonly count: number;
  readonly inputs: readonly SampleInput[];
}

type Obj = Record<string, unknown>;
const asObj = (v: unknown): Obj => (typeof v === 'object' && v !== null ? (v as Obj) : {});

/** Resolves `config.model_warmup` and reads its data files; every problem is a load error naming the sample. */
export async function loadWarmupSamples(config: NormalizedConfig, modelDir: string): Promise<WarmupSample[]> {
  const batching = config.max_batch_size > 0;
  const known = new Map(config.input.map((i) => [i.name as string, i.data_type]));
  const scheduled = scheduledInputNames(config);
  const samples: WarmupSample[] = [];
  for (const raw of (config.model_warmup ?? []) as Obj[]) {
    const name = String(raw.name ?? '');
    const batchSize = typeof raw.batch_size === 'number' ? raw.batch_size : 0;
    if (batchSize === 0) continue;
    const where = `model_warmup sample '${name}'`;
    const inputs: SampleInput[] = [];
    for (const [input, value] of Object.entries(asObj(raw.inputs))) {
      const v = asObj(value);
      const datatype = dataTypeFromConfig((v.data_type as string | undefined) ?? 'TYPE_INVALID');
      if (datatype === undefined) throw new InvalidArgError(`${where}: input '${input}' needs a data_type`);
      if (!known.has(input) && !scheduled.has(input)) {
        throw new InvalidArgError(
          `${where}: '${input}' is not an input of model '${config.name}' (its inputs are [${[...known.keys()].map((k) => `'${k}'`).join(', ')}])`,
        );
      }
      const declared = known.get(input);
      if (declared !== undefined && dataTypeFromConfig(declared) !== datatype) {
        throw new InvalidArgError(
          `${where}: input '${input}' is ${v.data_type as string}, but the model's is ${declared}`,
        );
      }
      const dims = (Array.isArray(v.dims) ? v.dims : []).map(Number);
      if (dims.some((d) => d < 0)) {
        throw new InvalidArgError(
          `warmup setting expects all variable-size dimensions are specified for input '${input}' (${where})`,
        );
      }
      const shape = batching ? [1, ...dims] : dims;
      if (v.zero_data === true) inputs.push({ name: input, datatype, shape, kind: 'zero' });
      else if (v.random_data === true) inputs.push({ name: input, datatype, shape, kind: 'random' });
      else if (typeof v.input_data_file === 'string') {
        const file = join(modelDir, WARMUP_FOLDER, v.input_data_file);
        const bytes = await readFile(file).catch((err: NodeJS.ErrnoException) => {
          throw new InvalidArgError(
            `${where}: input '${input}': cannot read ${file}: ${err.code === 'ENOENT' ? 'no such file' : err.message}`,
          );
        });
        inputs.push({
          name: input,
          datatype,
          shape,
          kind: 'file',
          data: fileData(datatype, shape, bytes, v.input_data_file, where),
        });
      } else {
        throw new InvalidArgError(`warmup setting expects input '${input}' to have input_data_type set (${where})`);
      }
    }
    const count = typeof raw.count === 'number' && raw.count > 0 ? raw.count : 1;
    samples.push(Object.freeze({ name, batchSize, count, inputs }));
  }
  return samples;
}

const elements = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

function fileData(
  datatype: DataType,
  shape: readonly number[],
  bytes: Buffer,
  file: string,
  where: string,
): TensorData {
  const data = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (datatype === 'BYTES') return decodeBytes(data, elements(shape), `${where} file ${file}`).map((e) => e.slice());
  const size = elements(shape) * DATATYPES[datatype].byteSize;
  if (size > data.byteLength) {
    throw new InvalidArgError(
      `warmup setting expects ${size} bytes, but the data provided from ${file} only has ${data.byteLength} bytes (${where})`,
    );
  }
  return viewFixed(datatype, data.slice(0, size));
}

/** A fresh tensor for one request (a transport may move what it is given). */
function tensorOf(input: SampleInput): Tensor {
  const n = elements(input.shape);
  const Ctor = DATATYPES[input.datatype].array;
  let data: TensorData;
  if (input.kind === 'file') {
    const d = input.data as TensorData;
    data = Array.isArray(d) ? d.map((e) => e.slice()) : d.slice();
  } else if (Ctor === undefined) {
    // Triton warms strings with empty elements even for random_data.
    data = Array.from({ length: n }, () => new Uint8Array(0));
  } else {
    data = new Ctor(n);
    if (input.kind === 'random') randomFillSync(data);
  }
  return { name: input.name, datatype: input.datatype, shape: [...input.shape], data };
}

/**
 * Runs every sample on every instance (instances in parallel, samples in order). Rejects with INVALID_ARG
 * "failed to run warmup sample '<name>': ..." on the first failure.
 */
export async function runWarmup(
  instances: readonly Instance[],
  samples: readonly WarmupSample[],
  outputs: readonly string[],
  signal?: AbortSignal,
): Promise<void> {
  const never = new AbortController().signal;
  await Promise.all(
    instances.map(async (instance) => {
      for (const sample of samples) {
        for (let i = 0; i < sample.count; i++) {
          const requests: EngineRequest[] = Array.from({ length: sample.batchSize }, () => ({
            inputs: sample.inputs.map(tensorOf),
            outputs: [...outputs],
            batchSize: 1,
          }));
          const errors: string[] = [];
          try {
            await instance.execute(
              requests,
              {
                send(_i, response) {
                  if (response instanceof Error) errors.push(response.message);
                },
              },
              signal ?? never,
            );
          } catch (err) {
            errors.push(NereidError.from(err).message);
          }
          if (errors.length > 0) {
            throw new InvalidArgError(
              `failed to run warmup sample '${sample.name}': ${[...new Set(errors)].join('; ')}`,
            );
          }
        }
      }
    }),
  );
}
