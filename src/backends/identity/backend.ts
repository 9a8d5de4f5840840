import { setTimeout as sleep } from 'node:timers/promises';
import type { ModelConfig, ModelInput, ModelOutput } from '../../config/model-config.js';
import { dataTypeFromConfig } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import type { Tensor, TensorData } from '../../core/tensor.js';
import type {
  Backend,
  BackendInstance,
  ExecuteRequest,
  ExecuteResult,
  LoadContext,
  LoadedModel,
  ModelSignature,
  TensorSignature,
} from '../backend.js';

/**
 * Triton's `identity` backend: output i is a copy of input i (by position in the config), with
 * controllable latency from model parameters, so scheduling (queueing, timeouts, cancellation,
 * shutdown, parallel instances) can be tested without an engine:
 * - `execute_delay_ms`: each execution waits this long (a timer, not CPU: instances overlap for real);
 * - `creation_delay_sec`: each instance takes this long to create.
 * It reads no file: the model is the version folder itself (`defaultModelFilename` is empty, so the
 * repository's "model file exists" check looks at `<model>/<version>/`).
 */
export function identityBackend(): Backend {
  return {
    name: 'identity',
    platforms: [],
    defaultModelFilename: '',

    async signature(_modelPath: string, ctx: { config: ModelConfig }): Promise<ModelSignature> {
      const batching = (ctx.config.max_batch_size ?? 0) > 0;
      const sig = (t: ModelInput | ModelOutput, kind: string): TensorSignature => {
        const datatype = dataTypeFromConfig(t.data_type ?? 'TYPE_INVALID');
        if (!datatype) throw new InvalidArgError(`identity: ${kind} '${t.name}' needs a data_type`);
        const dims = t.reshape ? (t.reshape.shape ?? []) : (t.dims ?? []);
        return { name: t.name as string, datatype, dims: batching ? [-1, ...dims] : [...dims] };
      };
      const inputs = (ctx.config.input ?? []).map((t) => sig(t, 'input'));
      const outputs = (ctx.config.output ?? []).map((t) => sig(t, 'output'));
      if (inputs.length === 0 || inputs.length !== outputs.length) {
        throw new InvalidArgError(
          `identity: config.pbtxt must declare as many outputs as inputs (output i echoes input i), got ${inputs.length} input(s) and ${outputs.length} output(s)`,
        );
      }
      return { inputs, outputs };
    },

    async load(ctx: LoadContext): Promise<LoadedModel> {
      const delayMs = numberParam(ctx.config, 'execute_delay_ms') ?? 0;
      const creationSec = numberParam(ctx.config, 'creation_delay_sec') ?? 0;
      // Output name → input name, by position (Triton's identity: INPUT0 → OUTPUT0).
      const inputs = ctx.config.input ?? [];
      const echo = new Map((ctx.config.output ?? []).map((o, i) => [o.name as string, inputs[i]?.name as string]));
      const count = (ctx.config.instance_group ?? [{}]).reduce(
        (n, g) => n + (g.count ?? 1) * (g.kind === 'KIND_GPU' ? Math.max(1, g.gpus?.length ?? 1) : 1),
        0,
      );
      const instances = await Promise.all(
        Array.from({ length: count }, async (_, i) => {
          if (creationSec > 0) await sleep(creationSec * 1000, undefined, { signal: ctx.signal });
          return new IdentityInstance(`${ctx.name}_${i}`, echo, delayMs);
        }),
      );
      return { instances, close: async () => {} };
    },
  };
}

class IdentityInstance implements BackendInstance {
  readonly name: string;
  readonly #echo: ReadonlyMap<string, string>;
  readonly #delayMs: number;

  constructor(name: string, echo: ReadonlyMap<string, string>, delayMs: number) {
    this.name = name;
    this.#echo = echo;
    this.#delayMs = delayMs;
  }

  async execute(request: ExecuteRequest): Promise<ExecuteResult> {
    const t0 = process.hrtime.bigint();
    if (this.#delayMs > 0) await sleep(this.#delayMs);
    const t1 = process.hrtime.bigint();
    const outputs = request.outputs.map((name): Tensor => {
      const from = request.inputs.find((t) => t.name === this.#echo.get(name));
      if (!from) throw new InvalidArgError(`identity: output '${name}' has no matching input in the request`);
      // A copy, as an engine would produce: outputs own their memory, whatever happens to the inputs.
      const data: TensorData = Array.isArray(from.data) ? [...from.data] : from.data.slice();
      return { name, datatype: from.datatype, shape: [...from.shape], data };
    });
    const t2 = process.hrtime.bigint();
    return {
      outputs,
      timings: { computeInputNs: 0, computeInferNs: Number(t1 - t0), computeOutputNs: Number(t2 - t1) },
    };
  }

  async close(): Promise<void> {}
}

function numberParam(config: ModelConfig, key: string): number | undefined {
  const s = config.parameters?.[key]?.string_value;
  if (s === undefined) return undefined;
  const n = Number(s);
  if (!Number.isFinite(n) || n < 0) {
    throw new InvalidArgError(`identity: parameter '${key}' must be a non-negative number, got '${s}'`);
  }
  return n;
}
