import { InvalidArgError } from '../core/errors.js';
import { maxBatchOf, type ModelConfig } from './model-config.js';

/**
 * Triton's `optimization { cuda { graph_spec [...] } }`: the shapes a backend captures a CUDA graph for ahead of
 * the first request — a batch size and the non-batch dims of inputs whose dims are variable — and, through
 * `graph_lower_bound`, the smaller batches that replay that graph padded up to its batch size. Read here once for
 * every backend that captures graphs (tensorrt, onnxruntime); each decides what it supports of it.
 */
export interface GraphSpec {
  batchSize: number;
  /** Non-batch dims per input name (inputs with fixed dims in the config may be left out). */
  inputs: Record<string, number[]>;
  /** `graph_lower_bound`: the smallest batch (and its input dims) that replays this graph padded. */
  lowerBound?: { batchSize: number; inputs: Record<string, number[]> };
}

interface RawSpec {
  batch_size?: number;
  input?: Record<string, unknown>;
  graph_lower_bound?: { batch_size?: number; input?: Record<string, unknown> };
}

/** The config's graph specs, checked: batch sizes within max_batch_size, dims positive, inputs declared. */
export function parseGraphSpecs(config: ModelConfig, where: string): GraphSpec[] {
  const cuda = (config.optimization?.cuda ?? {}) as { graph_spec?: RawSpec[] };
  const maxBatch = maxBatchOf(config);
  const declared = new Set((config.input ?? []).map((t) => t.name));
  const inputsOf = (w: string, raw: Record<string, unknown> | undefined): Record<string, number[]> => {
    const inputs: Record<string, number[]> = {};
    for (const [k, v] of Object.entries(raw ?? {})) {
      if (declared.size > 0 && !declared.has(k))
        throw new InvalidArgError(`${w}: input '${k}' is not an input of the model`);
      inputs[k] = dimsOf(`${w}.input['${k}']`, v);
    }
    return inputs;
  };
  const batchOf = (w: string, raw: number | undefined): number => {
    const b = raw ?? 0;
    if (!Number.isSafeInteger(b) || b < 0) throw new InvalidArgError(`${w}: batch_size must be >= 0`);
    if (maxBatch > 0 && (b < 1 || b > maxBatch)) {
      throw new InvalidArgError(`${w}: batch_size ${b} must be between 1 and max_batch_size ${maxBatch}`);
    }
    return b;
  };
  return (cuda.graph_spec ?? []).map((s, i): GraphSpec => {
    const w = `${where}: optimization.cuda.graph_spec[${i}]`;
    const spec: GraphSpec = { batchSize: batchOf(w, s.batch_size), inputs: inputsOf(w, s.input) };
    if (s.graph_lower_bound !== undefined) {
      const lw = `${w}.graph_lower_bound`;
      const lower = {
        batchSize: batchOf(lw, s.graph_lower_bound.batch_size),
        inputs: inputsOf(lw, s.graph_lower_bound.input),
      };
      if (lower.batchSize > spec.batchSize) {
        throw new InvalidArgError(
          `${lw}: batch_size ${lower.batchSize} is above the graph's batch_size ${spec.batchSize}`,
        );
      }
      spec.lowerBound = lower;
    }
    return spec;
  });
}

function dimsOf(where: string, v: unknown): number[] {
  const dims = (v as { dim?: unknown } | undefined)?.dim;
  if (!Array.isArray(dims) || !dims.every((d) => Number.isSafeInteger(d) && (d as number) > 0)) {
    throw new InvalidArgError(`${where}: expected dim: [...] of positive integers`);
  }
  return dims as number[];
}
