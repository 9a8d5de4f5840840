import { errorFromData } from '../core/errors.js';
import { MessageChannel, type Worker } from 'node:worker_threads';
import { CancelledError, InvalidArgError, type NereidError } from '../core/errors.js';
import { noopLogger, type Logger } from '../core/logger.js';
import { RestartBackoff } from '../core/restart-policy.js';
import type { ConsoleSources } from '../console/index.js';
import type { InferenceServerApi } from '../server/api.js';
import { DEFAULT_DRAIN_IDLE_MS } from '../protocol/http/server.js';
import { FrontEndHost } from './host.js';
import { spawnFrontEndThread } from './spawn.js';
import type { FrontEndConsole, FrontEndGrpcOptions, FrontEndHttpOptions } from './thread-data.js';
import { Tag, type WireError } from './wire.js';

/**
 * N front-end threads (`--http-thread-count`), each running the HTTP and gRPC protocol code on listeners that share
 * the ports through SO_REUSEPORT (the kernel spreads connections among them), against the one InferenceServer of
 * the main thread (host.ts, proxy.ts). The first thread resolves port 0; the others bind the port it got.
 *
 * Faults: a thread that exits while the pool is open (an uncaught exception, an abort) is replaced after the backoff
 * of core/restart-policy.ts, the instance pool's too (100 ms doubling per consecutive death up to 30 s, reset by 30 s
 * of life since the thread listened); what it had in flight on the main thread is cancelled (nobody is left to answer). Its sockets die with it: the kernel
 * gives new connections to the threads still listening.
 *
 * Shutdown: `close({ drainMs, idleMs })` asks every thread to close its listeners and drain as the main thread
 * would (HTTP: open keep-alive connections keep being served until idle for `idleMs` or `drainMs` passes; gRPC:
 * calls get `drainMs`), then ends it. Threading: main thread.
 *
 * Limits hold for the process, not per thread: `--http-max-connections` is checked against a count every thread
 * adds to (http/server.ts sharedConnections); the others (input sizes, timeouts, response sizes, stream
 * backpressure, restricted APIs) apply per request or per connection on the thread that has it.
 */

export interface FrontEndOptions {
  threads: number;
  http?: FrontEndHttpOptions;
  grpc?: FrontEndGrpcOptions;
  /** The web console on the HTTP port: its routes run on the threads, its sources stay here. */
  console?: ConsoleSources;
  logger?: Logger;
}

/** How the threads drain at shutdown (the main thread's HTTP close options; drainMs is gRPC's grace too). */
export interface DrainOptions {
  drainMs?: number;
  idleMs?: number;
}

export interface RunningFrontEnds {
  readonly threads: number;
  httpPort?: number;
  httpAddress?: string;
  grpcPort?: number;
  /** Threads started in place of ones that died. */
  readonly restarts: number;
  /** Stops accepting, drains every thread, ends them. Idempotent. A number is `drainMs`. */
  close(drain?: DrainOptions | number): Promise<void>;
  /**
   * Fault injection for tests: 'throw' raises an exception no request owns inside thread `index` (as a bug in a
   * timer callback would), 'terminate' ends it abruptly; both resolve once its replacement listens. 'block' keeps
   * the thread busy for `ms` (as one expensive request would) and resolves when the block begins.
   */
  injectFault(index: number, kind: 'throw' | 'terminate' | 'block', ms?: number): Promise<void>;
}

/**
 * Whether this runtime can share a port among threads: `listen({ reusePort })` came in Node 22.12 and 23.1, for the
 * platforms with a balancing SO_REUSEPORT (Linux, FreeBSD); elsewhere Node refuses the option.
 */
export const REUSE_PORT_SUPPORTED = ((): boolean => {
  const [major, minor] = process.versions.node.split('.').map(Number);
  const node = major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
  return node && (process.platform === 'linux' || process.platform === 'freebsd');
})();

/**
 * `nereid serve`'s default thread count: one per core from 4 cores, where they can share ports; the main thread
 * alone below that. Measured on 2 cores (simple, HTTP binary, c=64, the load generator on the same cores): one thread
 * served 23-28k req/s, two 14-15k. Each front-end thread adds work per request (packing, two postMessages, a
 * wake-up of each loop, its own GC: about 44 µs of front-end CPU against the 26 µs the protocol took on the main
 * thread) and pays for it only when it has a core of its own; a thread also costs about 35 MB of memory.
 */
export function defaultThreadCount(cores: number): number {
  return REUSE_PORT_SUPPORTED && cores >= 4 ? cores : 1;
}

interface Ready {
  httpPort?: number;
  httpAddress?: string;
  grpcPort?: number;
}

/** One front-end thread as the main thread sees it: the worker, its host, and when it is ready or gone. */
class FrontEndThread {
  readonly index: number;
  readonly worker: Worker;
  readonly host: FrontEndHost;
  readonly ready: Promise<Ready>;
  readonly exited: Promise<number>;
  closing = false;

  constructor(
    index: number,
    api: InferenceServerApi,
    opts: FrontEndOptions,
    connections: SharedArrayBuffer,
    logger: Logger,
  ) {
    this.index = index;
    const sync = new MessageChannel();
    const flag = new SharedArrayBuffer(4);
    const console: FrontEndConsole | undefined = opts.console && {
      modelControlMode: opts.console.modelControlMode,
      logsKept: opts.console.logs?.capacity,
      access: opts.console.access !== undefined,
      repositories: opts.console.repositories,
    };
    this.worker = spawnFrontEndThread({
      index,
      http: opts.http,
      grpc: opts.grpc,
      console: opts.http && console,
      connections,
      syncPort: sync.port2,
      syncFlag: flag,
    });
    this.host = new FrontEndHost(api, this.worker, { port: sync.port1, flag }, logger, opts.console);
    let ready!: (r: Ready) => void;
    let failed!: (err: NereidError) => void;
    this.ready = new Promise<Ready>((resolve, reject) => ((ready = resolve), (failed = reject)));
    // A start that fails is reported through `ready`; nobody may be awaiting a later failure.
    this.ready.catch(() => undefined);
    this.worker.on('message', (msg: unknown[]) => {
      if (this.host.handle(msg)) return;
      switch (msg[0]) {
        case Tag.READY:
          ready({ httpPort: msg[1] as number, httpAddress: msg[2] as string, grpcPort: msg[3] as number });
          break;
        case Tag.FAILED:
          failed(errorFromData(msg[1] as WireError));
          void this.worker.terminate();
          break;
        case Tag.CLOSED:
          void this.worker.terminate();
          break;
        default:
          break; // FATAL: the exit that follows is what counts; the thread logged why.
      }
    });
    // An error the thread could not handle itself (its entry failed to load): the exit follows.
    this.worker.on('error', (err) => logger.error({ err, frontEnd: index }, `front-end thread ${index} failed`));
    this.exited = new Promise((resolve) =>
      this.worker.once('exit', (code) => {
        this.host.fail(new CancelledError(`front-end thread ${index} exited while the request was in flight`));
        sync.port1.close();
        failed(new CancelledError(`front-end thread ${index} exited (code ${code}) before it listened`));
        resolve(code);
      }),
    );
  }

  close(drain: Required<DrainOptions>): Promise<number> {
    this.closing = true;
    this.worker.postMessage([Tag.CLOSE, drain.drainMs, drain.idleMs]);
    return this.exited;
  }
}

/** The open pool: its threads, each one's restart backoff, and the replacement of a thread that died. */
class FrontEndPool {
  readonly threads: FrontEndThread[] = [];
  /** What a thread starts with: the options, with the ports the first thread got once it listens. */
  settings: FrontEndOptions;
  restarts = 0;
  readonly #api: InferenceServerApi;
  readonly #logger: Logger;
  readonly #backoffs: RestartBackoff[];
  readonly #connections: SharedArrayBuffer;
  #closing: Promise<void> | undefined;

  constructor(api: InferenceServerApi, opts: FrontEndOptions, logger: Logger) {
    this.#api = api;
    this.settings = opts;
    this.#logger = logger;
    // A pending replacement keeps the process alive: the threads are what serves.
    this.#backoffs = Array.from({ length: opts.threads }, () => new RestartBackoff({ keepAlive: true }));
    this.#connections = new SharedArrayBuffer(4 * opts.threads);
  }

  start(index: number): FrontEndThread {
    // A thread that died took its connections with it (its sockets closed with its event loop).
    Atomics.store(new Int32Array(this.#connections), index, 0);
    const t = new FrontEndThread(index, this.#api, this.settings, this.#connections, this.#logger);
    this.threads[index] = t;
    // Its life counts from when it listens: a thread that never did is a failed start.
    t.ready.then(
      () => this.#backoffs[index].up(),
      () => undefined,
    );
    void t.exited.then((code) => this.#exited(t, code));
    return t;
  }

  /** A thread exited: unless the pool (or the thread) was closing, a replacement starts after its backoff. */
  #exited(t: FrontEndThread, code: number): void {
    const index = t.index;
    if (t.closing || this.#closing !== undefined || this.threads[index] !== t) return;
    const delay = this.#backoffs[index].schedule(() => {
      if (this.#closing !== undefined) return;
      this.restarts++;
      this.start(index).ready.then(
        () => this.#logger.info({ frontEnd: index }, `front-end thread ${index} replaced`),
        (err: unknown) => this.#logger.error({ err, frontEnd: index }, `replacing front-end thread ${index} failed`),
      );
    });
    this.#logger.error(
      { frontEnd: index, code },
      `front-end thread ${index} exited (code ${code}); starting a replacement in ${delay} ms`,
    );
  }

  close(drain: Required<DrainOptions>): Promise<void> {
    this.#closing ??= (async () => {
      for (const b of this.#backoffs) b.cancel();
      await Promise.all(
        this.threads.map(async (t) => {
          // A thread still starting finishes its start (or fails it) before it can drain.
          await t.ready.catch(() => undefined);
          await t.close(drain);
        }),
      );
    })();
    return this.#closing;
  }

  async injectFault(index: number, kind: 'throw' | 'terminate' | 'block', ms: number): Promise<void> {
    const t = this.threads[index];
    if (t === undefined) throw new InvalidArgError(`no front-end thread ${index}`);
    if (kind === 'block') {
      const began = new SharedArrayBuffer(4);
      t.worker.postMessage([Tag.CRASH, 'block', ms, began]);
      while (Atomics.load(new Int32Array(began), 0) === 0) await new Promise((r) => setTimeout(r, 1));
      return;
    }
    if (kind === 'terminate') void t.worker.terminate();
    else t.worker.postMessage([Tag.CRASH, 'throw']);
    await t.exited;
    // The replacement is started after the backoff; wait until it listens.
    for (;;) {
      const next = this.threads[index];
      if (next !== t) {
        await next.ready;
        return;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/** Starts the threads; resolves once every one listens. On failure whatever started is ended before the throw. */
export async function startFrontEnds(api: InferenceServerApi, opts: FrontEndOptions): Promise<RunningFrontEnds> {
  if (!Number.isSafeInteger(opts.threads) || opts.threads < 1) {
    throw new InvalidArgError(`--http-thread-count must be a positive integer, got ${opts.threads}`);
  }
  if (!REUSE_PORT_SUPPORTED) {
    throw new InvalidArgError(
      `front-end threads share their ports through SO_REUSEPORT, which needs Node >= 22.12 on Linux or FreeBSD (this is ${process.version} on ${process.platform}); use --http-thread-count=1`,
    );
  }
  const pool = new FrontEndPool(api, opts, opts.logger ?? noopLogger);
  let first: Ready;
  try {
    first = await pool.start(0).ready;
    // The others bind the ports the first one got.
    pool.settings = {
      ...opts,
      http: opts.http && { ...opts.http, port: first.httpPort as number },
      grpc: opts.grpc && { ...opts.grpc, port: first.grpcPort as number },
    };
    await Promise.all(Array.from({ length: opts.threads - 1 }, (_, i) => pool.start(i + 1).ready));
  } catch (err) {
    await pool.close({ drainMs: 0, idleMs: 0 });
    throw err;
  }

  return {
    threads: opts.threads,
    httpPort: first.httpPort,
    httpAddress: first.httpAddress,
    grpcPort: first.grpcPort,
    get restarts() {
      return pool.restarts;
    },
    close: (drain = {}) => {
      const d = typeof drain === 'number' ? { drainMs: drain } : drain;
      return pool.close({ drainMs: d.drainMs ?? 30_000, idleMs: d.idleMs ?? DEFAULT_DRAIN_IDLE_MS });
    },
    injectFault: (index, kind, ms = 1000) => pool.injectFault(index, kind, ms),
  };
}
