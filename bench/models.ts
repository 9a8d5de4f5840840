/**
 * The two benchmarked models: how to build their inputs for raw onnxruntime-node, for perf_analyzer and for
 * KServe v2 JSON, and their configs for the temporary repositories (batching on and off).
 */
import { join } from 'node:path';
import { ROOT } from './common.js';

export type ModelName = 'simple' | 'text_encoder';

export interface InputSpec {
  name: string;
  /** Per-sample values (INT32); a request of batch b repeats them b times. */
  values: Int32Array;
}

export interface ModelSpec {
  name: ModelName;
  onnxFile: string;
  inputs: InputSpec[];
  /** Dims of one sample (no batch dim), the same for every input. */
  sampleDims: number[];
  /** Complete config.pbtxt without dynamic_batching (complete, so auto-complete adds none). */
  config: string;
  /** Queue delay of the batching-on repository. */
  maxQueueDelayUs: number;
}

const EXAMPLES = join(ROOT, 'examples/model_repository');
export const SEQ = 128;

function int32Config(name: string, inputs: string[], outputs: string, dims: string): string {
  const ins = inputs.map((n) => `  { name: "${n}"\n    data_type: TYPE_INT32\n    dims: [ ${dims} ] }`).join(',\n');
  return `name: "${name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\ninput [\n${ins}\n]\noutput [\n${outputs}\n]\n`;
}

export const MODELS: Record<ModelName, ModelSpec> = {
  simple: {
    name: 'simple',
    onnxFile: join(EXAMPLES, 'simple/1/model.onnx'),
    inputs: [
      { name: 'INPUT0', values: Int32Array.from({ length: 16 }, (_, i) => i) },
      { name: 'INPUT1', values: new Int32Array(16).fill(1) },
    ],
    sampleDims: [16],
    config: int32Config(
      'simple',
      ['INPUT0', 'INPUT1'],
      '  { name: "OUTPUT0"\n    data_type: TYPE_INT32\n    dims: [ 16 ] },\n  { name: "OUTPUT1"\n    data_type: TYPE_INT32\n    dims: [ 16 ] }',
      '16',
    ),
    maxQueueDelayUs: 100,
  },
  text_encoder: {
    name: 'text_encoder',
    onnxFile: join(EXAMPLES, 'text_encoder/1/model.onnx'),
    inputs: [
      { name: 'input_ids', values: Int32Array.from({ length: SEQ }, (_, i) => (i * 7919 + 101) % 1000) },
      { name: 'attention_mask', values: new Int32Array(SEQ).fill(1) },
      { name: 'token_type_ids', values: Int32Array.from({ length: SEQ }, (_, i) => (i < SEQ / 2 ? 0 : 1)) },
    ],
    sampleDims: [SEQ],
    config: int32Config(
      'text_encoder',
      ['input_ids', 'attention_mask', 'token_type_ids'],
      '  { name: "output"\n    data_type: TYPE_FP32\n    dims: [ -1, 64 ] }',
      '-1',
    ),
    maxQueueDelayUs: 500,
  },
};

/** A KServe v2 JSON request of batch 1 (what perf_analyzer's JSON mode and the peers' clients send). */
export function jsonRequest(spec: ModelSpec): string {
  return JSON.stringify({
    inputs: spec.inputs.map((i) => ({
      name: i.name,
      shape: [1, ...spec.sampleDims],
      datatype: 'INT32',
      data: Array.from(i.values),
    })),
  });
}

/** perf_analyzer's --input-data file: one sample per input, with its shape (batch dim excluded). */
export function perfAnalyzerData(spec: ModelSpec): string {
  const entry: Record<string, { content: number[]; shape: number[] }> = {};
  for (const i of spec.inputs) entry[i.name] = { content: Array.from(i.values), shape: spec.sampleDims };
  return JSON.stringify({ data: [entry] });
}
