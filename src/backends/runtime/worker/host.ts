import { errorFromData } from '../../../core/errors.js';
import type { Worker } from 'node:worker_threads';
import type { ModelConfig } from '../../../config/model-config.js';
import { CancelWatch } from '../../../core/cancel-watch.js';
import { noopLogger, type Logger } from '../../../core/logger.js';
import { CancelledError, InternalError, UnavailableError } from '../../../core/errors.js';
import type {
  AutoCompleteContext,
  Backend,
  BackendDescriptor,
  EngineLoadContext,
  Execute,
  ExecuteTimings,
  Instance,
  InstanceSpec,
  ModelHandle,
  Responder,
} from '../../contract.js';
import { instanceDied } from '../fault.js';
import type { FromEngine, ToEngine, WireResponse } from './protocol.js';
import { spawnEngineThread } from './spawn.js';
import { packBatch, unpackTensors } from './wire.js';

/**
 * The worker-thread transport, host side: each instance is an engine thread of its own (harness.ts) that
 * loads the model and creates one instance. For engines whose calls block their thread (onnxruntime-node's
 * run()). Threading: every method here runs on the main thread and only posts messages.
 */

/**
 * How long destroy() waits for an engine thread to release its engine before terminating it. terminate() while
 * the thread is inside native code can abort the process, so it is the last resort for a thread that is idle
 * but will not exit.
 */
const CLOSE_GRACE_MS = 10_000;

export function workerBackend(descriptor: BackendDescriptor, adapterUrl: string): Backend {
  return {
    ...descriptor,
    async autoComplete(config: ModelConfig, ctx: AutoCompleteContext): Promise<ModelConfig> {
      const { logger, signal, ...plain } = ctx;
      const worker = spawnEngineThread({ mode: 'autocomplete', adapterUrl, config, ctx: plain });
      const msg = await firstReply(worker, signal, 'auto-complete');
      worker.unref();
      if (msg.type === 'load-error') throw errorFromData(msg.error);
      if (msg.type !== 'autocompleted')
        throw new InternalError(`engine thread answered '${msg.type}' to auto-complete`);
      for (const w of msg.result.warnings) logger.warn({ model: plain.modelName }, w);
      return msg.result.config;
    },
    async load(ctx: EngineLoadContext & { logger?: Logger }): Promise<ModelHandle> {
      const { logger, ...plain } = ctx;
      return {
        createInstance: (spec, signal) => startInstance(adapterUrl, plain, spec, logger ?? noopLogger, signal),
        // Each instance's thread loaded and unloads the model itself.
        unload: async () => {},
      };
    },
  };
}

/** Waits for the thread's first message (or its death, or the signal). Leaves no listener behind. */
function firstReply(worker: Worker, signal: AbortSignal | undefined, what: string): Promise<FromEngine> {
  return new Promise((resolve, reject) => {
    const done = (): void => {
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
      signal?.removeEventListener('abort', onAbort);
    };
    const onMessage = (m: FromEngine): void => {
      if (m.type === 'log') return; // written by the thread's log listener (startInstance)
      done();
      resolve(m);
    };
    const onError = (err: Error): void => (
      done(),
      reject(new InternalError(`engine thread failed during ${what}: ${err.message}`, { cause: err }))
    );
    const onExit = (code: number): void => (
      done(),
      reject(new InternalError(`engine thread exited (code ${code}) during ${what}`))
    );
    // The thread finishes what it is doing and exits by itself (never terminated inside native code).
    const onAbort = (): void => {
      done();
      worker.postMessage({ type: 'unload' } satisfies ToEngine);
      reject(new CancelledError(`${what} was cancelled`));
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

async function startInstance(
  adapterUrl: string,
  ctx: EngineLoadContext,
  spec: InstanceSpec,
  logger: Logger,
  signal?: AbortSignal,
): Promise<Instance> {
  if (signal?.aborted) throw new CancelledError('instance creation was cancelled');
  const worker = spawnEngineThread({ mode: 'model', adapterUrl, ctx });
  worker.on('message', (m: FromEngine) => {
    if (m.type === 'log') logger[m.level]({ ...m.obj, instance: spec.name }, m.msg);
  });
  const loaded = await firstReply(worker, signal, `loading instance ${spec.name}`);
  if (loaded.type === 'load-error') throw errorFromData(loaded.error);
  worker.postMessage({ type: 'create', id: 0, spec } satisfies ToEngine);
  const created = await firstReply(worker, signal, `creating instance ${spec.name}`);
  if (created.type === 'create-error') {
    worker.postMessage({ type: 'unload' } satisfies ToEngine);
    throw errorFromData(created.error);
  }
  return new WorkerInstance(spec.name, worker);
}

interface Pending {
  id: number;
  responder: Responder;
  resolve(t: ExecuteTimings): void;
  reject(e: Error): void;
  /** Main-thread time spent packing the inputs, added to compute_input. */
  prepNs: number;
  signal: AbortSignal;
}

class WorkerInstance implements Instance {
  readonly name: string;
  readonly died: Promise<Error>;
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  /**
   * An execution whose signal aborts is cancelled in the engine thread. One listener per distinct signal for the
   * instance's life, not one per execution (adding and removing one per request was measurable on the main thread).
   */
  readonly #cancels = new CancelWatch<Pending>((p) =>
    this.#worker.postMessage({ type: 'cancel', id: p.id } satisfies ToEngine),
  );
  #die!: (e: Error) => void;
  #dead: Error | undefined;
  #nextId = 0;
  #destroying: Promise<void> | undefined;

  constructor(name: string, worker: Worker) {
    this.name = name;
    this.#worker = worker;
    this.died = new Promise((resolve) => (this.#die = resolve));
    worker.on('message', (msg: FromEngine) => this.#onMessage(msg));
    worker.on('error', (err) => this.#fail(instanceDied(name, 'engine thread', `uncaught ${err.message}`)));
    worker.on('exit', (code) => {
      if (this.#destroying === undefined) this.#fail(instanceDied(name, 'engine thread', `exited with code ${code}`));
    });
  }

  readonly execute: Execute = (requests, responder, signal) => {
    if (this.#dead) return Promise.reject(this.#dead);
    if (this.#destroying) return Promise.reject(new UnavailableError(`instance ${this.name} is being destroyed`));
    if (signal.aborted) return Promise.reject(new CancelledError('request was cancelled before execution'));
    const t0 = process.hrtime.bigint();
    const id = this.#nextId++;
    const { batch, transfer } = packBatch(requests);
    try {
      this.#worker.postMessage({ type: 'execute', id, instance: 0, batch } satisfies ToEngine, transfer);
    } catch {
      // A buffer marked untransferable (Node's Buffer pool): copy every input once and send again.
      const copied = packBatch(
        requests.map((r) => ({
          ...r,
          inputs: r.inputs.map((t) => ({ ...t, data: Array.isArray(t.data) ? t.data : t.data.slice() })),
        })),
      );
      this.#worker.postMessage(
        { type: 'execute', id, instance: 0, batch: copied.batch } satisfies ToEngine,
        copied.transfer,
      );
    }
    const prepNs = Number(process.hrtime.bigint() - t0);
    return new Promise((resolve, reject) => {
      const p: Pending = { id, responder, resolve, reject, prepNs, signal };
      this.#cancels.watch(signal, p);
      this.#pending.set(id, p);
    });
  };

  #deliver(p: Pending, responses: readonly WireResponse[]): void {
    for (const r of responses) {
      if (r.error !== undefined) p.responder.send(r.index, errorFromData(r.error), { final: true });
      else {
        const response =
          r.outputs === undefined ? null : { outputs: unpackTensors(r.outputs), parameters: r.parameters };
        p.responder.send(r.index, response, { final: r.final });
      }
    }
  }

  #onMessage(msg: FromEngine): void {
    if (msg.type !== 'done' && msg.type !== 'failed' && msg.type !== 'responses') return;
    const p = this.#pending.get(msg.id);
    if (p === undefined) return;
    if (msg.type === 'responses') {
      this.#deliver(p, msg.responses);
      return;
    }
    this.#pending.delete(msg.id);
    this.#cancels.unwatch(p.signal, p);
    const t0 = process.hrtime.bigint();
    try {
      this.#deliver(p, msg.responses);
    } catch (err) {
      p.reject(new InternalError(`instance ${this.name}: malformed responses from its engine thread`, { cause: err }));
      return;
    }
    if (msg.type === 'failed') {
      const err = errorFromData(msg.error);
      p.reject(err);
      if (msg.fault) this.#fail(instanceDied(this.name, 'engine thread', msg.error.message), false);
      return;
    }
    const t = msg.timings;
    p.resolve({
      computeInputNs: t.computeInputNs + p.prepNs,
      computeInferNs: t.computeInferNs,
      computeOutputNs: t.computeOutputNs + Number(process.hrtime.bigint() - t0),
    });
  }

  /** The thread died (or its engine faulted): fail everything in flight, never hang, and tell the pool. */
  #fail(err: Error, failPending = true): void {
    if (this.#dead !== undefined) return;
    this.#dead = err;
    if (failPending) {
      for (const p of this.#pending.values()) {
        this.#cancels.unwatch(p.signal, p);
        p.reject(err);
      }
      this.#pending.clear();
    }
    this.#die(err);
  }

  /** Lets the in-flight batch finish, releases the engine, ends the thread. Idempotent. */
  destroy(): Promise<void> {
    this.#destroying ??= this.#destroy();
    return this.#destroying;
  }

  async #destroy(): Promise<void> {
    const inflight = [...this.#pending.values()].map(
      (p) =>
        new Promise<void>((done) => {
          const { resolve, reject } = p;
          p.resolve = (t) => (resolve(t), done());
          p.reject = (e) => (reject(e), done());
        }),
    );
    await Promise.all(inflight);
    // A thread that already exited (threadId -1) has nothing left to release.
    if (this.#worker.threadId === -1) return;
    const exited = new Promise<void>((done) => this.#worker.once('exit', () => done()));
    this.#worker.postMessage({ type: 'unload' } satisfies ToEngine);
    const timer = setTimeout(() => void this.#worker.terminate(), CLOSE_GRACE_MS);
    timer.unref();
    await exited;
    clearTimeout(timer);
  }

  /** Fault injection for tests: the engine thread exits at once, as a crashed one would. */
  __crash(): void {
    this.#worker.postMessage({ type: '__crash' } satisfies ToEngine);
  }
}
