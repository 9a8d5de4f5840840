import type { ExecuteRequest } from '../backends/backend.js';
import type { ModelConfig, ModelInput } from '../config/model-config.js';
import { dataTypeFromConfig } from '../core/datatypes.js';
import { InvalidArgError } from '../core/errors.js';
import type { InferRequest, RequestedOutput } from '../core/inference.js';
import { elementCount, type Tensor } from '../core/tensor.js';

const fmt = (d: readonly number[]): string => `[${d.join(',')}]`;

/** A request checked against its model, ready for the scheduler. */
export interface ValidatedRequest {
  execute: ExecuteRequest;
  /** Batch size the request counts as (1 when the model does not batch). */
  batchSize: number;
  /** Requested outputs in request order (every output when the request named none). */
  outputs: RequestedOutput[];
}

/**
 * Checks inputs and requested outputs against the model config, with Triton's messages (their key
 * phrases are what clients and Triton's tests match on). Shapes sent to the backend are the config's
 * `reshape` where one is given.
 */
export function validateRequest(req: InferRequest, model: string, config: ModelConfig): ValidatedRequest {
  const mbs = config.max_batch_size ?? 0;
  const declared = new Map((config.input ?? []).map((i) => [i.name as string, i]));
  const seen = new Set<string>();
  let batchSize = -1;
  const inputs: Tensor[] = [];
  for (const input of req.inputs) {
    const cfg = declared.get(input.name);
    if (!cfg) throw new InvalidArgError(`unexpected inference input '${input.name}' for model '${model}'`);
    if (seen.has(input.name)) throw new InvalidArgError(`input '${input.name}' already exists in request`);
    seen.add(input.name);
    const expectedType = dataTypeFromConfig(cfg.data_type ?? 'TYPE_INVALID');
    if (input.datatype !== expectedType) {
      throw new InvalidArgError(
        `inference input '${input.name}' data-type is '${input.datatype}', but model '${model}' expects '${expectedType}'`,
      );
    }
    const dims = cfg.dims ?? [];
    const full = mbs > 0 ? [-1, ...dims] : dims;
    const shape = input.shape;
    if (shape.length !== full.length || shape.some((d, i) => full[i] !== -1 && d !== full[i])) {
      throw new InvalidArgError(
        `unexpected shape for input '${input.name}' for model '${model}'. Expected ${fmt(full)}, got ${fmt(shape)}.` +
          (mbs > 0 && shape.length === dims.length
            ? ` NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to each input shape. If you want to specify the full shape including the batch dim in your input dims config, try setting max_batch_size to zero.`
            : ''),
      );
    }
    if (mbs > 0) {
      const b = shape[0];
      if (b < 1 || b > mbs) {
        throw new InvalidArgError(
          `inference request batch-size must be <= ${mbs} for '${model}'` + (b < 1 ? ' and >= 1' : ''),
        );
      }
      if (batchSize !== -1 && b !== batchSize) {
        throw new InvalidArgError(
          `input '${input.name}' batch size ${b} does not match other inputs' batch size ${batchSize} for model '${model}'`,
        );
      }
      batchSize = b;
    }
    const count = elementCount(shape, `input '${input.name}'`);
    const got = Array.isArray(input.data) ? input.data.length : input.data.length;
    if (got !== count) {
      throw new InvalidArgError(
        `input '${input.name}' for model '${model}': shape ${fmt(shape)} needs ${count} elements, got ${got}`,
      );
    }
    inputs.push({ name: input.name, datatype: input.datatype, shape: backendShape(cfg, shape, mbs), data: input.data });
  }
  const missing = [...declared.values()].filter((i) => !i.optional && !seen.has(i.name as string));
  if (missing.length > 0) {
    const names = (xs: string[]): string => `[${xs.map((x) => `'${x}'`).join(',')}]`;
    throw new InvalidArgError(
      `expected ${declared.size} inputs but got ${req.inputs.length} inputs for model '${model}'. Got input(s) ${names(req.inputs.map((i) => i.name))}, but missing required input(s) ${names(missing.map((i) => i.name as string))}. Please provide all required input(s).`,
    );
  }
  const outputs = validateOutputs(req.outputs, model, config);
  return {
    execute: { inputs, outputs: outputs.map((o) => o.name) },
    batchSize: mbs > 0 ? batchSize : 1,
    outputs,
  };
}

/** With `reshape`, the backend sees the reshaped dims (batch dim kept in front). */
function backendShape(cfg: ModelInput, shape: number[], mbs: number): number[] {
  if (!cfg.reshape) return shape;
  const r = cfg.reshape.shape ?? [];
  return mbs > 0 ? [shape[0], ...r] : [...r];
}

function validateOutputs(
  requested: RequestedOutput[] | undefined,
  model: string,
  config: ModelConfig,
): RequestedOutput[] {
  const declared = config.output ?? [];
  if (requested === undefined || requested.length === 0) return declared.map((o) => ({ name: o.name as string }));
  const names = new Set(declared.map((o) => o.name));
  const seen = new Set<string>();
  for (const o of requested) {
    if (!names.has(o.name)) throw new InvalidArgError(`unexpected inference output '${o.name}' for model '${model}'`);
    if (seen.has(o.name)) throw new InvalidArgError(`output '${o.name}' already exists in request`);
    seen.add(o.name);
    if (o.classCount !== undefined && (!Number.isInteger(o.classCount) || o.classCount < 0)) {
      throw new InvalidArgError(
        `output '${o.name}': classification count must be a non-negative integer, got ${o.classCount}`,
      );
    }
  }
  return requested;
}
