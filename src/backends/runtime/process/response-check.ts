import type { NormalizedConfig } from '../../../config/model-config.js';
import { dataTypeFromConfig, type DataType } from '../../../core/datatypes.js';
import { InternalError } from '../../../core/errors.js';
import type { Tensor } from '../../../core/tensor.js';
import type { EngineRequest, EngineResponse } from '../../contract.js';

/**
 * What a Python model returns, checked against its config before a client sees it: exactly the outputs the
 * request asked for, in its order; each with the config's datatype and a shape its dims allow (the batch dim is
 * the request's). A model that breaks this gets an INTERNAL error for that request, naming the output and both
 * sides, instead of sending a client tensors it cannot decode.
 */

interface OutputSpec {
  datatype: DataType | undefined;
  configType: string;
  /** Shape the model produces, without the batch dim (reshape.shape when the config reshapes; the server then
   * gives the client the config's dims). */
  dims: number[];
}

export function responseChecker(
  config: Readonly<NormalizedConfig>,
  instanceName: string,
): (request: EngineRequest, response: EngineResponse) => EngineResponse {
  const batching = config.max_batch_size > 0;
  const specs = new Map<string, OutputSpec>();
  for (const o of config.output) {
    const dims = (o.dims ?? []).map(Number);
    const reshape = o.reshape ? (o.reshape.shape ?? []).map(Number) : undefined;
    specs.set(o.name ?? '', {
      datatype: dataTypeFromConfig(o.data_type ?? 'TYPE_INVALID'),
      configType: o.data_type ?? 'TYPE_INVALID',
      dims: reshape ?? dims,
    });
  }
  const fail = (msg: string): never => {
    throw new InternalError(`model instance '${instanceName}' ${msg}`);
  };
  return (request, response) => {
    const byName = new Map<string, Tensor>();
    for (const t of response.outputs) byName.set(t.name, t);
    const outputs: Tensor[] = [];
    for (const name of request.outputs) {
      const t = byName.get(name);
      if (t === undefined) {
        fail(
          `did not return requested output '${name}' (it returned [${response.outputs.map((o) => `'${o.name}'`).join(', ')}])`,
        );
      }
      const spec = specs.get(name);
      if (spec !== undefined) outputs.push(checkOne(t!, spec, batching ? request.batchSize : undefined, fail));
      else outputs.push(t!);
    }
    const checked: EngineResponse = { outputs };
    if (response.parameters !== undefined) checked.parameters = response.parameters;
    if (response.lease !== undefined) checked.lease = response.lease;
    return checked;
  };
}

function checkOne(t: Tensor, spec: OutputSpec, batch: number | undefined, fail: (m: string) => never): Tensor {
  if (spec.datatype !== undefined && t.datatype !== spec.datatype) {
    fail(`returned output '${t.name}' as ${t.datatype}, but the config declares ${spec.configType}`);
  }
  const want = batch === undefined ? spec.dims : [batch, ...spec.dims];
  const ok = t.shape.length === want.length && t.shape.every((d, i) => want[i] === -1 || d === want[i]);
  if (!ok) {
    const shown =
      batch === undefined
        ? `[${spec.dims.join(',')}]`
        : `[${want.join(',')}] (batch ${batch}, dims [${spec.dims.join(',')}])`;
    fail(`returned output '${t.name}' with shape [${t.shape.join(',')}], but the config expects ${shown}`);
  }
  return t;
}
