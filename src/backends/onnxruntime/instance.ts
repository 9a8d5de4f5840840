import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { CancelledError, ERROR_CLASSES, InternalError, InvalidArgError, UnavailableError } from '../../core/errors.js';
import type { NereidError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { BackendInstance, ExecuteRequest, ExecuteResult, ModelSignature } from '../backend.js';
import { copyWire, fromWire, toWire } from './convert.js';
import type { FromWorker, ToWorker, WireError, WorkerInit } from './protocol.js';

/**
 * The main-thread side of a session worker. Threading: every method runs on the main thread and only posts
 * messages; the worker owns the InferenceSession. The worker file has this module's extension, so the same
 * code runs from src/*.ts under tsx and from dist/*.js after tsc.
 */
const ext = extname(fileURLToPath(import.meta.url));
const WORKER_URL = new URL(`./worker${ext}`, import.meta.url);

/**
 * Under tsx (source .ts) the worker needs tsx's loader. `execArgv: ['--import', 'tsx']` is not enough on
 * Node 20 (the worker's entry is resolved before the --import hooks apply: ERR_UNKNOWN_FILE_EXTENSION), so a
 * tiny eval'd bootstrap registers tsx in the worker and then imports the real entry.
 */
function newWorker(workerData: WorkerInit): Worker {
  if (ext !== '.ts') return new Worker(WORKER_URL, { workerData });
  const api = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(WORKER_URL.href)}); })`;
  return new Worker(code, { eval: true, workerData });
}

/**
 * How long close() waits for a worker to release its session before terminating it. terminate() while the
 * worker is inside onnxruntime's native code aborts the process (measured: `terminate called after throwing
 * an instance of 'Napi::Error'`), so it is only the last resort for a worker that is idle but will not exit.
 */
const CLOSE_GRACE_MS = 10_000;

function fromWireError(e: WireError): NereidError {
  return new ERROR_CLASSES[e.code](e.message);
}

interface Pending {
  resolve: (r: ExecuteResult) => void;
  reject: (e: Error) => void;
  /** Main-thread time spent preparing the inputs, added to compute_input. */
  prepNs: number;
}

/**
 * Starts a session worker and waits until its session is created. Rejects with the load error (INVALID_ARG
 * for a bad model or option ORT rejects, UNSUPPORTED for a datatype it lacks) and leaves no thread behind.
 */
export function startSessionWorker(
  init: WorkerInit,
  signal?: AbortSignal,
): Promise<{ worker: Worker; signature: ModelSignature }> {
  if (signal?.aborted) return Promise.reject(new CancelledError('model load was cancelled'));
  const worker = newWorker(init);
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (): boolean => {
      const first = !settled;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      return first;
    };
    const cleanup = (): void => {
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
    };
    const onMessage = (msg: FromWorker): void => {
      if (msg.type === 'ready') {
        cleanup();
        // Cancelled meanwhile: release the session the way close() does (never terminate(): see #close).
        if (settle()) resolve({ worker, signature: msg.signature });
        else if (init.mode === 'instance') worker.postMessage({ type: 'close' } satisfies ToWorker);
      } else if (msg.type === 'load-error') {
        // The worker exits by itself after reporting a load error.
        cleanup();
        if (settle()) reject(fromWireError(msg.error));
      }
    };
    const onError = (err: Error): void => {
      cleanup();
      if (settle()) reject(new InternalError(`onnxruntime worker failed: ${err.message}`, { cause: err }));
    };
    const onExit = (code: number): void => {
      cleanup();
      if (settle()) reject(new InternalError(`onnxruntime worker exited (code ${code}) while loading`));
    };
    // Abort rejects at once but lets session creation finish in the worker: terminating a thread inside
    // onnxruntime's native code aborts the whole process.
    const onAbort = (): void => {
      if (settle()) reject(new CancelledError('model load was cancelled'));
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** One model instance: one worker thread holding one InferenceSession. */
export class OrtInstance implements BackendInstance {
  readonly name: string;
  readonly signature: ModelSignature;
  /** Set when the worker died; every later execute() fails with it. */
  failure: Error | undefined;
  readonly #worker: Worker;
  readonly #logger: Logger;
  readonly #pending = new Map<number, Pending>();
  #nextId = 0;
  #closing: Promise<void> | undefined;

  constructor(name: string, started: { worker: Worker; signature: ModelSignature }, logger: Logger) {
    this.name = name;
    this.signature = started.signature;
    this.#worker = started.worker;
    this.#logger = logger;
    this.#worker.on('message', (msg: FromWorker) => this.#onMessage(msg));
    this.#worker.on('error', (err) =>
      this.#fail(new InternalError(`instance ${name}: onnxruntime worker crashed: ${err.message}`, { cause: err })),
    );
    this.#worker.on('exit', (code) => {
      if (this.#closing === undefined)
        this.#fail(new InternalError(`instance ${name}: onnxruntime worker exited unexpectedly (code ${code})`));
    });
  }

  /**
   * Runs one batch in the worker. Ownership: input buffers that span their whole ArrayBuffer are transferred
   * to the worker and are detached when this returns; other inputs are copied. Outputs arrive by transfer and
   * belong to the caller. An abort before the batch is posted rejects with CANCELLED; once posted, the run
   * completes (ORT cannot interrupt a run here) and its result is returned.
   */
  execute(request: ExecuteRequest, opts: { signal?: AbortSignal } = {}): Promise<ExecuteResult> {
    if (opts.signal?.aborted) return Promise.reject(new CancelledError('request was cancelled before execution'));
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.#closing !== undefined) return Promise.reject(new UnavailableError(`instance ${this.name} is closing`));
    for (const t of request.inputs) {
      if (t.datatype === 'BF16') {
        return Promise.reject(
          new InvalidArgError(`input '${t.name}': BF16 has no onnxruntime-node tensor type; send FP32 or FP16`),
        );
      }
    }
    const t0 = process.hrtime.bigint();
    let packed = toWire(request.inputs);
    const id = this.#nextId++;
    const msg = (): ToWorker => ({ type: 'run', id, inputs: packed.wire, outputs: request.outputs });
    try {
      this.#worker.postMessage(msg(), packed.transfer);
    } catch (err) {
      // A buffer marked untransferable (Node's Buffer pool) or already detached: copy everything once.
      this.#logger.debug({ err }, 'onnxruntime: input transfer failed, copying');
      try {
        packed = copyWire(packed.wire);
        this.#worker.postMessage(msg(), packed.transfer);
      } catch (err2) {
        return Promise.reject(new InvalidArgError(`cannot send inputs to the onnxruntime worker: ${String(err2)}`));
      }
    }
    const prepNs = Number(process.hrtime.bigint() - t0);
    return new Promise((resolve, reject) => this.#pending.set(id, { resolve, reject, prepNs }));
  }

  #onMessage(msg: FromWorker): void {
    if (msg.type !== 'result' && msg.type !== 'run-error') return;
    const p = this.#pending.get(msg.id);
    if (p === undefined) return;
    this.#pending.delete(msg.id);
    if (msg.type === 'run-error') {
      p.reject(fromWireError(msg.error));
      return;
    }
    try {
      const t0 = process.hrtime.bigint();
      const outputs = fromWire(msg.outputs);
      const { computeInputNs, computeInferNs, computeOutputNs } = msg.timings;
      p.resolve({
        outputs,
        timings: {
          computeInputNs: computeInputNs + p.prepNs,
          computeInferNs,
          computeOutputNs: computeOutputNs + Number(process.hrtime.bigint() - t0),
        },
      });
    } catch (err) {
      p.reject(new InternalError(`instance ${this.name}: malformed output from worker`, { cause: err }));
    }
  }

  /** The worker died: fail everything in flight (never hang) and remember why for later calls. */
  #fail(err: Error): void {
    if (this.failure !== undefined) return;
    this.failure = err;
    this.#logger.error({ err, instance: this.name }, 'onnxruntime instance failed');
    for (const p of this.#pending.values()) p.reject(err);
    this.#pending.clear();
  }

  /** Stops accepting, lets in-flight runs finish, releases the session, ends the thread. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    const inflight = [...this.#pending.values()].map(
      (p) =>
        new Promise<void>((done) => {
          const { resolve, reject } = p;
          p.resolve = (r) => (resolve(r), done());
          p.reject = (e) => (reject(e), done());
        }),
    );
    await Promise.all(inflight);
    if (this.failure !== undefined) {
      await this.#worker.terminate();
      return;
    }
    const exited = new Promise<void>((done) => this.#worker.once('exit', () => done()));
    this.#worker.postMessage({ type: 'close' } satisfies ToWorker);
    const timer = setTimeout(() => void this.#worker.terminate(), CLOSE_GRACE_MS);
    timer.unref();
    await exited;
    clearTimeout(timer);
  }
}
