import { errorToData } from '../../../core/errors.js';
import { parentPort, workerData } from 'node:worker_threads';
import type { EngineAdapter, EngineInstance, EngineModel, EngineResponse, Responder } from '../../contract.js';
import { EngineFault } from '../fault.js';
import type { Logger } from '../../../core/logger.js';
import type { FromEngine, LogLevel, ToEngine, WireResponse, WorkerData } from './protocol.js';
import { copyTensors, packResponses, unpackBatch } from './wire.js';

/**
 * The engine side of the worker-thread transport: loads an adapter module (`export const adapter`), loads the
 * model in this thread and serves the host's messages. Executions on one instance are serialized by the host;
 * several instances in one thread interleave only where their engine awaits.
 */

const port = parentPort;
if (port === null) throw new Error('harness.ts must run in a worker thread');
const data = workerData as WorkerData;

function post(msg: FromEngine, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(msg, transfer);
}

/**
 * Posts a message carrying responses: their buffers are transferred (the engine gave them away); a buffer that
 * cannot be transferred (Node's Buffer pool) makes us copy every tensor of the message once instead.
 */
function postResponses(
  make: (r: WireResponse[]) => FromEngine,
  items: { index: number; final: boolean; response?: EngineResponse; error?: Error }[],
): void {
  const transfer = new Set<ArrayBuffer>();
  const tensors = packResponses(
    items.map((it) => it.response ?? { outputs: [] }),
    transfer,
  );
  const build = (ts: typeof tensors): WireResponse[] =>
    items.map((it, i) => ({
      index: it.index,
      final: it.final,
      ...(it.error !== undefined ? { error: errorToData(it.error) } : {}),
      ...(it.response !== undefined ? { outputs: ts[i], parameters: it.response.parameters } : {}),
    }));
  try {
    post(make(build(tensors)), [...transfer]);
  } catch {
    const copied = copyTensors(tensors);
    post(make(build(copied.tensors)), copied.transfer);
  }
}

const LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error'];

/**
 * The engine's logger in this thread: each record enabled at the host's level (`logLevel`) goes to the host as a
 * 'log' message, which writes it with the server's logger (this thread has none of its own).
 */
function threadLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  const min = LEVELS.indexOf(level as LogLevel);
  const at =
    (l: LogLevel) =>
    (obj: object | string, msg?: string): void => {
      if (min < 0 || LEVELS.indexOf(l) < min) return;
      const [o, m] = typeof obj === 'string' ? [{}, obj] : [obj, msg ?? ''];
      try {
        post({ type: 'log', level: l, obj: { ...bindings, ...o }, msg: m });
      } catch {
        // The port closed (the model unloaded): nobody is left to read the line.
      }
    };
  return {
    level,
    error: at('error'),
    warn: at('warn'),
    info: at('info'),
    debug: at('debug'),
    trace: at('trace'),
    child: (more) => threadLogger(level, { ...bindings, ...more }),
  };
}

async function serve(adapter: EngineAdapter, model: EngineModel): Promise<void> {
  const instances = new Map<number, EngineInstance>();
  const running = new Map<number, AbortController>();
  const life = new AbortController();

  const execute = async (msg: Extract<ToEngine, { type: 'execute' }>): Promise<void> => {
    const instance = instances.get(msg.instance);
    const controller = new AbortController();
    running.set(msg.id, controller);
    let settled = false;
    const pending: { index: number; final: boolean; response?: EngineResponse; error?: Error }[] = [];
    const responder: Responder = {
      send(index, response, opts) {
        const item =
          response instanceof Error
            ? { index, final: true, error: response }
            : { index, final: opts.final, response: response ?? undefined };
        if (!settled) pending.push(item);
        else postResponses((responses) => ({ type: 'responses', id: msg.id, responses }), [item]);
      },
    };
    try {
      if (instance === undefined) throw new EngineFault(`no instance ${msg.instance} in this engine thread`);
      const timings = await instance.execute(unpackBatch(msg.batch), responder, controller.signal);
      settled = true;
      postResponses((responses) => ({ type: 'done', id: msg.id, responses, timings }), pending);
    } catch (err) {
      settled = true;
      const fault = err instanceof EngineFault;
      postResponses(
        (responses) => ({ type: 'failed', id: msg.id, responses, error: errorToData(err), fault }),
        pending,
      );
    } finally {
      running.delete(msg.id);
    }
  };

  port!.on('message', (msg: ToEngine) => {
    switch (msg.type) {
      case 'create':
        model.createInstance(msg.spec, life.signal).then(
          (inst) => {
            instances.set(msg.id, inst);
            post({ type: 'created', id: msg.id });
          },
          (err: unknown) => post({ type: 'create-error', id: msg.id, error: errorToData(err) }),
        );
        return;
      case 'execute':
        void execute(msg);
        return;
      case 'cancel':
        running.get(msg.id)?.abort();
        return;
      case 'destroy': {
        const inst = instances.get(msg.instance);
        instances.delete(msg.instance);
        void (inst?.destroy() ?? Promise.resolve())
          .catch(() => undefined)
          .then(() => post({ type: 'destroyed', instance: msg.instance }));
        return;
      }
      case 'unload':
        life.abort();
        port!.removeAllListeners('message');
        void Promise.all([...instances.values()].map((i) => i.destroy().catch(() => undefined)))
          .then(() => model.unload())
          .catch(() => undefined)
          .finally(() => {
            post({ type: 'unloaded' });
            port!.close();
          });
        return;
      case '__crash':
        process.exit(70);
    }
  });
  void adapter;
}

async function main(): Promise<void> {
  let adapter: EngineAdapter;
  try {
    adapter = ((await import(data.adapterUrl)) as { adapter: EngineAdapter }).adapter;
  } catch (err) {
    post({ type: 'load-error', error: errorToData(err) });
    return;
  }
  if (data.mode === 'autocomplete') {
    try {
      const result = adapter.autoComplete
        ? await adapter.autoComplete(data.config, data.ctx)
        : { config: data.config, warnings: [] };
      post({ type: 'autocompleted', result });
    } catch (err) {
      post({ type: 'load-error', error: errorToData(err) });
    }
    port!.close();
    return;
  }
  let model: EngineModel;
  try {
    const ctx = { ...data.ctx, logger: threadLogger(data.ctx.logLevel) };
    model = await adapter.load(ctx, new AbortController().signal);
  } catch (err) {
    post({ type: 'load-error', error: errorToData(err) });
    port!.close();
    return;
  }
  post({ type: 'loaded' });
  await serve(adapter, model);
}

void main();
