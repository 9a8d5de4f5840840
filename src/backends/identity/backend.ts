import { setTimeout as sleep } from 'node:timers/promises';
import type { ModelConfig } from '../../config/model-config.js';
import { ALL_DATATYPES } from '../../core/datatypes.js';
import { CancelledError, InvalidArgError } from '../../core/errors.js';
import type { Tensor, TensorData } from '../../core/tensor.js';
import type { Backend, BackendDescriptor, EngineAdapter, EngineInstance } from '../contract.js';
import { inProcessBackend } from '../runtime/inprocess.js';
import { workerBackend } from '../runtime/worker/host.js';
import { adapterUrl } from '../runtime/worker/spawn.js';
import { withThreadTransport } from '../runtime/transport.js';

/**
 * Triton's `identity` backend: output i is a copy of input i (by position in the config), with controllable
 * latency from model parameters, so scheduling (queueing, timeouts, cancellation, shutdown, parallel instances)
 * can be tested without an engine:
 * - `execute_delay_ms`: each execution waits this long (a timer, not CPU: instances overlap for real); the wait
 *   ends early when the execution's signal aborts, as an engine that can stop a run does;
 * - `creation_delay_sec`: each instance takes this long to create.
 * It reads no file: the model is the version folder itself. It runs in-process (it never blocks).
 */

function numberParam(config: ModelConfig, key: string): number | undefined {
  const s = config.parameters?.[key]?.string_value;
  if (s === undefined) return undefined;
  const n = Number(s);
  if (!Number.isFinite(n) || n < 0) {
    throw new InvalidArgError(`identity: parameter '${key}' must be a non-negative number, got '${s}'`);
  }
  return n;
}

class IdentityInstance implements EngineInstance {
  readonly #echo: ReadonlyMap<string, string>;
  readonly #delayMs: number;

  constructor(echo: ReadonlyMap<string, string>, delayMs: number) {
    this.#echo = echo;
    this.#delayMs = delayMs;
  }

  async execute(
    ...[requests, responder, signal]: Parameters<EngineInstance['execute']>
  ): ReturnType<EngineInstance['execute']> {
    const t0 = process.hrtime.bigint();
    if (this.#delayMs > 0) {
      try {
        await sleep(this.#delayMs, undefined, { signal });
      } catch (err) {
        throw new CancelledError('identity: execution was cancelled', { cause: err });
      }
    }
    const t1 = process.hrtime.bigint();
    requests.forEach((request, i) => {
      const outputs = request.outputs.map((name): Tensor => {
        const from = request.inputs.find((t) => t.name === this.#echo.get(name));
        if (!from) throw new InvalidArgError(`identity: output '${name}' has no matching input in the request`);
        // A copy, as an engine would produce: outputs are given to the host, inputs are only borrowed.
        const data: TensorData = Array.isArray(from.data) ? [...from.data] : from.data.slice();
        return { name, datatype: from.datatype, shape: [...from.shape], data };
      });
      responder.send(i, { outputs }, { final: true });
    });
    const t2 = process.hrtime.bigint();
    return { computeInputNs: 0, computeInferNs: Number(t1 - t0), computeOutputNs: Number(t2 - t1) };
  }

  async destroy(): Promise<void> {}
}

export const adapter: EngineAdapter = {
  async autoComplete(config) {
    const inputs = config.input ?? [];
    const outputs = config.output ?? [];
    for (const t of [...inputs, ...outputs]) {
      if (t.data_type === undefined || t.data_type === 'TYPE_INVALID') {
        throw new InvalidArgError(`identity: tensor '${t.name}' needs a data_type`);
      }
    }
    if (inputs.length === 0 || inputs.length !== outputs.length) {
      throw new InvalidArgError(
        `identity: config.pbtxt must declare as many outputs as inputs (output i echoes input i), got ${inputs.length} input(s) and ${outputs.length} output(s)`,
      );
    }
    return { config, warnings: [] };
  },

  async load(ctx) {
    const delayMs = numberParam(ctx.config, 'execute_delay_ms') ?? 0;
    const creationSec = numberParam(ctx.config, 'creation_delay_sec') ?? 0;
    // Output name → input name, by position (Triton's identity: INPUT0 → OUTPUT0).
    const inputs = ctx.config.input ?? [];
    const echo = new Map((ctx.config.output ?? []).map((o, i) => [o.name as string, inputs[i]?.name as string]));
    return {
      async createInstance(_spec, signal) {
        if (creationSec > 0) {
          try {
            await sleep(creationSec * 1000, undefined, { signal });
          } catch (err) {
            throw new CancelledError('identity: instance creation was cancelled', { cause: err });
          }
        }
        return new IdentityInstance(echo, delayMs);
      },
      async unload() {},
    };
  },
};

/**
 * `--backend-config=identity,transport=thread` hosts each instance in an engine thread of its own instead of the
 * main thread: the same adapter behind the worker transport, so thread faults and cancellation across threads
 * can be tested without an engine.
 */
export function identityBackend(): Backend {
  const descriptor = {
    name: 'identity',
    platforms: [],
    defaultModelFilename: '',
    datatypes: ALL_DATATYPES,
    sections: [],
    kinds: ['KIND_CPU', 'KIND_MODEL'],
    settings: {
      keys: ['transport'],
      check(cfg) {
        const t = cfg.transport;
        if (t !== undefined && t !== 'inprocess' && t !== 'thread') {
          throw new InvalidArgError(`--backend-config=identity,transport must be 'inprocess' or 'thread', got '${t}'`);
        }
      },
      parameters: ['execute_delay_ms', 'creation_delay_sec'],
    },
  } satisfies BackendDescriptor;
  const inProcess = inProcessBackend(
    {
      ...descriptor,
      async autoComplete(config, ctx) {
        return (await (adapter.autoComplete as NonNullable<EngineAdapter['autoComplete']>)(config, ctx)).config;
      },
    },
    adapter,
  );
  const threaded = workerBackend(descriptor, adapterUrl(import.meta.url, './backend'));
  return withThreadTransport('identity', inProcess, threaded);
}
