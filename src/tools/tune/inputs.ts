/**
 * The requests `nereid tune` sends: the model's real input shapes (from its metadata, variable dimensions given by
 * `--shape` or a default), filled with deterministic pseudo-random values, or the requests of an `--input-data`
 * file in perf_analyzer's JSON form (`{"data": [{"INPUT0": [..] | {"content": [..], "shape": [..]}}]}`).
 */
import { readFile } from 'node:fs/promises';
import { DATATYPES, type DataType } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import { floatToHalfBits, floatToBf16Bits } from '../../core/half.js';
import type { InferInputTensor, ModelMetadata } from '../../client/index.js';

/** One request: its input tensors. */
export type TuneRequest = InferInputTensor[];

/** A variable dimension with no `--shape` for it: long enough to be real work, short enough for any model. */
export const DEFAULT_VARIABLE_DIM = 16;

/** A small deterministic generator (mulberry32): the same requests on every run, so answers compare. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Values of one datatype from numbers. Integers are 0 or 1 (the first always 1): every index, token id, token type
 * and attention mask input accepts those; real value ranges come with `--input-data`.
 */
function fill(datatype: DataType, count: number, next: () => number): InferInputTensor['data'] {
  if (datatype === 'BYTES') return Array.from({ length: count }, () => `tune-${Math.floor(next() * 1000)}`);
  const info = DATATYPES[datatype];
  const out = new (info.array as NonNullable<typeof info.array>)(count);
  for (let i = 0; i < count; i++) {
    const x = i === 0 ? 0.75 : next();
    if (datatype === 'FP32' || datatype === 'FP64') out[i] = x;
    else if (datatype === 'FP16') out[i] = floatToHalfBits(x);
    else if (datatype === 'BF16') out[i] = floatToBf16Bits(x);
    else if (datatype === 'BOOL') out[i] = x < 0.5 ? 0 : 1;
    else if (datatype === 'INT64' || datatype === 'UINT64') (out as BigInt64Array)[i] = BigInt(Math.floor(x * 2));
    else out[i] = Math.floor(x * 2);
  }
  return out;
}

/** Concrete shape of one input: the batch dimension 1, other variable dimensions from `shapes` or the default. */
function concreteShape(name: string, shape: readonly number[], batching: boolean, shapes: Map<string, number[]>) {
  const given = shapes.get(name);
  const dims = batching ? shape.slice(1) : [...shape];
  const out = given ?? dims.map((d) => (d < 0 ? DEFAULT_VARIABLE_DIM : d));
  return batching ? [1, ...out] : out;
}

/** `count` generated requests for the model's inputs. */
export function generatedRequests(
  meta: ModelMetadata,
  batching: boolean,
  shapes: Map<string, number[]>,
  count: number,
): TuneRequest[] {
  const next = random(29);
  return Array.from({ length: count }, () =>
    meta.inputs.map((t) => {
      const shape = concreteShape(t.name, t.shape, batching, shapes);
      const datatype = t.datatype as DataType;
      return {
        name: t.name,
        datatype,
        shape,
        data: fill(
          datatype,
          shape.reduce((a, b) => a * b, 1),
          next,
        ),
      };
    }),
  );
}

/** `--shape NAME:d1,d2`: the dimensions after the batch dimension. */
export function parseShapes(flags: readonly string[]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const flag of flags) {
    const m = /^([^:]+):(\d+(?:,\d+)*)$/.exec(flag);
    if (!m) throw new InvalidArgError(`--shape '${flag}': expected NAME:d1,d2,… (e.g. input_ids:128)`);
    out.set(m[1], m[2].split(',').map(Number));
  }
  return out;
}

type DataEntry = Record<string, unknown[] | { content: unknown[]; shape?: number[] }>;

/** Requests read from a perf_analyzer `--input-data` JSON file. */
export async function requestsFromFile(path: string, meta: ModelMetadata, batching: boolean): Promise<TuneRequest[]> {
  let json: { data?: DataEntry[] };
  try {
    json = JSON.parse(await readFile(path, 'utf8')) as { data?: DataEntry[] };
  } catch (err) {
    throw new InvalidArgError(`--input-data '${path}': ${(err as Error).message}`, { cause: err });
  }
  if (!Array.isArray(json.data) || json.data.length === 0) {
    throw new InvalidArgError(`--input-data '${path}': expected {"data": [{"<input>": [values…]}, …]}`);
  }
  return json.data.map((entry, i) =>
    meta.inputs.map((t) => {
      const v = entry[t.name];
      if (v === undefined) throw new InvalidArgError(`--input-data '${path}': data[${i}] has no input '${t.name}'`);
      const content = Array.isArray(v) ? v : v.content;
      const given = Array.isArray(v) ? undefined : v.shape;
      const shape = given ? (batching ? [1, ...given] : given) : fileShape(t.shape, batching, content.length);
      return { name: t.name, datatype: t.datatype as DataType, shape, data: typed(t.datatype as DataType, content) };
    }),
  );
}

/** A shape for flat content: the metadata's, its one variable dimension (if any) taken from the element count. */
function fileShape(shape: readonly number[], batching: boolean, count: number): number[] {
  const dims = batching ? shape.slice(1) : [...shape];
  const fixed = dims.filter((d) => d >= 0).reduce((a, b) => a * b, 1);
  const variable = dims.filter((d) => d < 0).length;
  const out = dims.map((d) => (d < 0 ? (variable === 1 ? count / fixed : DEFAULT_VARIABLE_DIM) : d));
  return batching ? [1, ...out] : out;
}

function typed(datatype: DataType, values: unknown[]): InferInputTensor['data'] {
  if (datatype === 'BYTES') return values.map(String);
  const info = DATATYPES[datatype];
  const out = new (info.array as NonNullable<typeof info.array>)(values.length);
  values.forEach((v, i) => {
    if (datatype === 'INT64' || datatype === 'UINT64') (out as BigInt64Array)[i] = BigInt(v as number);
    else if (datatype === 'FP16') out[i] = floatToHalfBits(Number(v));
    else if (datatype === 'BF16') out[i] = floatToBf16Bits(Number(v));
    else out[i] = Number(v);
  });
  return out;
}
