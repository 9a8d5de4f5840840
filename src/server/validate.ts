import type { EngineRequest } from '../backends/contract.js';
import { DATATYPES } from '../core/datatypes.js';
import { InvalidArgError } from '../core/errors.js';
import type { InferInput, InferRequest, RequestedOutput } from '../core/inference.js';
import { elementCount, type Tensor } from '../core/tensor.js';
import type { ModelSpec, TensorSpec } from '../repository/spec.js';

const fmt = (d: readonly number[]): string => `[${d.join(',')}]`;

/** Why a batch-size limit the user never wrote applies, and how to raise it. */
function autoCompletedNote(spec: ModelSpec): string {
  const flag =
    spec.backend === 'onnxruntime'
      ? ', or start the server with --backend-config=onnxruntime,default-max-batch-size=N'
      : '';
  return (
    `. NOTE: max_batch_size ${spec.maxBatchSize} was auto-completed (the model file allows any batch size, and ` +
    `config.pbtxt sets no max_batch_size); to take larger batches set max_batch_size in config.pbtxt${flag}`
  );
}

/** A request checked against its model, ready for the scheduler. */
export interface ValidatedRequest {
  request: EngineRequest;
  /** Requested outputs in request order (every output when the request named none). */
  outputs: RequestedOutput[];
}

/**
 * Checks inputs and requested outputs against the model's resolved spec, with Triton's messages (their key
 * phrases are what clients and Triton's tests match on). Shapes sent to the engine are the config's `reshape`
 * where one is given.
 */
export function validateRequest(req: InferRequest, spec: ModelSpec): ValidatedRequest {
  const model = spec.name;
  const mbs = spec.maxBatchSize;
  const seen = new Set<string>();
  let batchSize = -1;
  const inputs: Tensor[] = [];
  for (const input of req.inputs) {
    const cfg = spec.inputs.get(input.name);
    if (!cfg) throw new InvalidArgError(`unexpected inference input '${input.name}' for model '${model}'`);
    if (seen.has(input.name)) throw new InvalidArgError(`input '${input.name}' already exists in request`);
    seen.add(input.name);
    if (input.datatype !== cfg.datatype) {
      // Triton's words, then what to do: neither Triton nor Nereid converts a datatype (an INT32 client of a
      // torch.onnx.export model, whose token inputs are INT64, gets this from Triton too).
      throw new InvalidArgError(
        `inference input '${input.name}' data-type is '${input.datatype}', but model '${model}' expects '${cfg.datatype}'` +
          `; inputs are not converted (Triton does not either): send '${input.name}' as ${cfg.datatype}, or give the model ${input.datatype} inputs`,
      );
    }
    const shape = input.shape;
    checkShape(input, cfg, model, mbs);
    if (mbs > 0) {
      const b = shape[0];
      if (b < 1 || b > mbs) {
        throw new InvalidArgError(
          `inference request batch-size must be <= ${mbs} for '${model}'` +
            (b < 1 ? ' and >= 1' : '') +
            (b > mbs && spec.maxBatchSizeAutoCompleted ? autoCompletedNote(spec) : ''),
        );
      }
      if (batchSize !== -1 && b !== batchSize) {
        throw new InvalidArgError(
          `input '${input.name}' batch size ${b} does not match other inputs' batch size ${batchSize} for model '${model}'`,
        );
      }
      batchSize = b;
    }
    checkElementCount(input, model);
    const tensor: Tensor = {
      name: input.name,
      datatype: input.datatype,
      shape: engineShape(cfg, shape, mbs),
      data: input.data,
    };
    if (input.device !== undefined) tensor.device = input.device;
    inputs.push(tensor);
  }
  if (spec.requiredInputs.some((n) => !seen.has(n))) throw missingInputs(req, spec, seen);
  // Config order: requests that share a batch must list their inputs alike (JSON bodies may order them freely).
  for (let i = 1; i < inputs.length; i++) {
    if ((spec.inputOrder.get(inputs[i - 1].name) as number) > (spec.inputOrder.get(inputs[i].name) as number)) {
      inputs.sort((a, b) => (spec.inputOrder.get(a.name) as number) - (spec.inputOrder.get(b.name) as number));
      break;
    }
  }
  const outputs = validateOutputs(req.outputs, spec);
  return {
    request: {
      inputs,
      outputs: outputs.map((o) => o.name),
      batchSize: mbs > 0 ? batchSize : 1,
      id: req.id,
      parameters: req.parameters,
      ...(req.device === undefined ? {} : { device: req.device }),
    },
    outputs,
  };
}

/** The input's shape against the config's dims (Triton's note when the batch dimension is missing). */
function checkShape(input: InferInput, cfg: TensorSpec, model: string, mbs: number): void {
  const full = cfg.fullDims;
  const shape = input.shape;
  if (shape.length !== full.length || shape.some((d, i) => full[i] !== -1 && d !== full[i])) {
    throw new InvalidArgError(
      `unexpected shape for input '${input.name}' for model '${model}'. Expected ${fmt(full)}, got ${fmt(shape)}.` +
        (mbs > 0 && shape.length === cfg.dims.length
          ? ` NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to each input shape. If you want to specify the full shape including the batch dim in your input dims config, try setting max_batch_size to zero.`
          : ''),
    );
  }
}

/** The input's data against its shape. */
function checkElementCount(input: InferInput, model: string): void {
  const shape = input.shape;
  const count = elementCount(shape, `input '${input.name}'`);
  // A device input's bytes were checked against its shape when it was bound (shm/bind.ts); checked again here.
  const got =
    input.device === undefined ? input.data.length : input.device.byteSize / DATATYPES[input.datatype].byteSize;
  if (got !== count) {
    throw new InvalidArgError(
      `input '${input.name}' for model '${model}': shape ${fmt(shape)} needs ${count} elements, got ${got}`,
    );
  }
}

/** Triton's message for required inputs the request left out. */
function missingInputs(req: InferRequest, spec: ModelSpec, seen: ReadonlySet<string>): InvalidArgError {
  const missing = spec.requiredInputs.filter((n) => !seen.has(n));
  const names = (xs: readonly string[]): string => `[${xs.map((x) => `'${x}'`).join(',')}]`;
  return new InvalidArgError(
    `expected ${spec.inputs.size} inputs but got ${req.inputs.length} inputs for model '${spec.name}'. Got input(s) ${names(req.inputs.map((i) => i.name))}, but missing required input(s) ${names(missing)}. Please provide all required input(s).`,
  );
}

/** With `reshape`, the engine sees the reshaped dims (batch dim kept in front). */
function engineShape(cfg: TensorSpec, shape: number[], mbs: number): number[] {
  if (cfg.reshape === undefined) return shape;
  return mbs > 0 ? [shape[0], ...cfg.reshape] : [...cfg.reshape];
}

function validateOutputs(requested: RequestedOutput[] | undefined, spec: ModelSpec): RequestedOutput[] {
  if (requested === undefined || requested.length === 0) return spec.outputNames.map((name) => ({ name }));
  const seen = new Set<string>();
  for (const o of requested) {
    if (!spec.outputs.has(o.name)) {
      throw new InvalidArgError(`unexpected inference output '${o.name}' for model '${spec.name}'`);
    }
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
