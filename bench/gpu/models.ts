import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../common.js';

/**
 * The models of the GPU benchmark (bench/gpu.ts) and their configs: text_encoder and BERT-base fp32/fp16 served with
 * KIND_GPU instances and dynamic batching, plain, with one or two instances, and with CUDA graphs.
 */

/** Tokens per sequence in every request and baseline. */
export const SEQ = 128;

/** A model Nereid serves in this benchmark; `file` is also what the onnxruntime baseline loads. */
export interface GpuModel {
  name: string;
  file: string;
  vocab: number;
  hidden: number;
  datatype: 'FP32' | 'FP16';
  /** KIND_GPU instances on GPU 0. */
  count: number;
  maxBatch: number;
  queueDelayUs: number;
  /** Key of the baseline rows this model is compared with (several configs share a file). */
  baseline: string;
  /** Config parameters (string values). */
  parameters?: Record<string, string>;
  /** CUDA provider options (`gpu_execution_accelerator` "cuda"), e.g. enable_cuda_graph. */
  cuda?: Record<string, string>;
  /**
   * The output is the first token's hidden state, [batch, hidden] (what embedding services return), instead of
   * every token's, [batch, SEQ, hidden]: the model exported with scripts/make_examples.py --bert --pooled.
   */
  pooled?: boolean;
  /** `optimization.cuda.graph_spec` as [batch_size, graph_lower_bound batch_size] pairs (captured at load). */
  graphSpec?: ReadonlyArray<readonly [number, number]>;
}

/** Graphs for every power-of-two batch up to 64, each replayed padded by the batches down to the next smaller. */
const POW2_GRAPHS: ReadonlyArray<readonly [number, number]> = [
  [1, 1],
  [2, 2],
  [4, 3],
  [8, 5],
  [16, 9],
  [32, 17],
  [64, 33],
];

export function gpuModels(opts: { modelsDir: string; dry: boolean; only?: readonly string[] }): GpuModel[] {
  const bert = (dtype: 'fp32' | 'fp16', count: number): GpuModel => ({
    name: `bert_${dtype}${count > 1 ? `_x${count}` : ''}`,
    file: join(opts.modelsDir, `bert-${dtype}`, 'model.onnx'),
    vocab: 30522,
    hidden: 768,
    datatype: dtype === 'fp32' ? 'FP32' : 'FP16',
    count,
    maxBatch: 64,
    // One instance: no delay (requests queue while it runs, so batches fill anyway, and c=1 pays nothing).
    // Two: a short delay, so that the idle instance does not take batches of one while the other computes.
    queueDelayUs: count > 1 ? 1000 : 0,
    baseline: `bert_${dtype}`,
  });
  const pooled = (count: number): GpuModel => ({
    ...bert('fp16', count),
    file: join(opts.modelsDir, 'bert-fp16-pooled', 'model.onnx'),
    baseline: 'bert_fp16_pooled',
    pooled: true,
  });
  const textEncoder: GpuModel = {
    name: 'text_encoder',
    file: join(ROOT, 'examples/model_repository/text_encoder/1/model.onnx'),
    vocab: 1000,
    hidden: 64,
    datatype: 'FP32',
    count: 1,
    maxBatch: 64,
    queueDelayUs: 0,
    baseline: 'text_encoder',
  };
  const all: GpuModel[] = [
    textEncoder,
    bert('fp32', 1),
    bert('fp32', 2),
    bert('fp16', 1),
    bert('fp16', 2),
    // The CPU side of a GPU session: no intra-op pool at all (Triton-legal), against the default pool above.
    { ...bert('fp16', 1), name: 'bert_fp16_t1', parameters: { intra_op_thread_count: '1' } },
    // CUDA graphs (captured per batch shape, replayed; host inputs copied into fixed device buffers).
    { ...bert('fp16', 1), name: 'bert_fp16_graph', cuda: { enable_cuda_graph: '1' } },
    // The same, captured at load for power-of-two batches that the batches between replay padded (graph_spec).
    { ...bert('fp16', 1), name: 'bert_fp16_graph_pad', cuda: { enable_cuda_graph: '1' }, graphSpec: POW2_GRAPHS },
    // Two such instances: one's copies and host work overlap the other's replay.
    { ...bert('fp16', 2), name: 'bert_fp16_graph_pad_x2', cuda: { enable_cuda_graph: '1' }, graphSpec: POW2_GRAPHS },
    // Issue 31's pooled row: 1.5 KB answers instead of 196 KB, so the server's own cost shows.
    { ...pooled(1), name: 'bert_fp16_pooled' },
    { ...pooled(2), name: 'bert_fp16_pooled_x2' },
    { ...textEncoder, name: 'text_encoder_graph', cuda: { enable_cuda_graph: '1' } },
    { ...textEncoder, name: 'text_encoder_graph_pad', cuda: { enable_cuda_graph: '1' }, graphSpec: POW2_GRAPHS },
  ];
  return all.filter(
    (m) =>
      (!(opts.dry || m.pooled === true) || existsSync(m.file)) &&
      (opts.only === undefined || opts.only.includes(m.name)),
  );
}

/** The model's config.pbtxt: KIND_GPU on GPU 0, or KIND_CPU for a dry run on a machine without a GPU. */
export function modelConfig(m: GpuModel, dry: boolean): string {
  const input = (n: string): string => `  { name: "${n}" data_type: TYPE_INT32 dims: [ -1 ] }`;
  return [
    `name: "${m.name}"`,
    'platform: "onnxruntime_onnx"',
    `max_batch_size: ${m.maxBatch}`,
    `input [\n${['input_ids', 'attention_mask', 'token_type_ids'].map(input).join(',\n')}\n]`,
    `output [ { name: "output" data_type: TYPE_${m.datatype} dims: [ ${m.pooled === true ? '' : '-1, '}${m.hidden} ] } ]`,
    `instance_group [ { kind: ${dry ? 'KIND_CPU' : 'KIND_GPU'} count: ${m.count}${dry ? '' : ' gpus: [ 0 ]'} } ]`,
    `dynamic_batching { max_queue_delay_microseconds: ${m.queueDelayUs} }`,
    ...Object.entries(m.parameters ?? {}).map(([k, v]) => `parameters { key: "${k}" value: { string_value: "${v}" } }`),
    ...(m.cuda === undefined
      ? []
      : [
          `optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "cuda" ${Object.entries(m.cuda)
            .map(([k, v]) => `parameters { key: "${k}" value: "${v}" }`)
            .join(' ')} } ] }${graphSpec(m)} }`,
        ]),
    '',
  ].join('\n');
}

/** The shape of one request's output (batch 1). */
export function outputShape(m: GpuModel): number[] {
  return m.pooled === true ? [1, m.hidden] : [1, SEQ, m.hidden];
}

/** The model's graph_spec entries (all three inputs at the benchmark's sequence length), or nothing. */
function graphSpec(m: GpuModel): string {
  if (m.graphSpec === undefined) return '';
  const inputs = ['input_ids', 'attention_mask', 'token_type_ids']
    .map((n) => `input { key: "${n}" value { dim: [ ${SEQ} ] } }`)
    .join(' ');
  const specs = m.graphSpec.map(
    ([b, lower]) => `{ batch_size: ${b} ${inputs} graph_lower_bound { batch_size: ${lower} ${inputs} } }`,
  );
  return ` cuda { graph_spec [ ${specs.join(', ')} ] }`;
}
