import { errorToData } from '../core/errors.js';
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import type { IncomingMessage } from 'node:http';
import { consoleRoutes, crossSiteRefusal, type ConsoleCategory, type ConsoleSources } from '../console/index.js';
import type { LatencySummary } from '../console/latency-window.js';
import { InternalError } from '../core/errors.js';
import { startGrpcServer, type RunningGrpcServer } from '../protocol/grpc/index.js';
import { startHttpServer, type RunningHttpServer } from '../protocol/http/server.js';
import { forwardingLogger } from './log.js';
import { ProxyServerApi } from './proxy.js';
import { AnswerSpin } from './answer-spin.js';
import { SyncCaller } from './sync-call.js';
import type { ThreadData } from './thread-data.js';
import { Tag } from './wire.js';

/**
 * Entry of a front-end thread: the unchanged HTTP and gRPC protocol code, listening with SO_REUSEPORT on the ports
 * every front-end thread shares, against a ProxyServerApi that forwards to the main thread. Started by pool.ts;
 * never imported by anything else (it has effects on load).
 *
 * Faults: an error a request causes is that request's (the protocols answer it and go on). An exception nobody
 * catches means this thread's state can no longer be trusted: the thread stops accepting connections, answers
 * every request still waiting for the main thread with INTERNAL, leaves within FATAL_GRACE_MS, and the pool starts
 * another in its place.
 */

const FATAL_GRACE_MS = 2000;

const data = workerData as ThreadData;
const port = parentPort as MessagePort;
const post = (msg: unknown[]): void => port.postMessage(msg);
const logger = forwardingLogger(post, { frontEnd: data.index });
const sync = new SyncCaller(data.syncPort, data.syncFlag);
// The spin needs the proxy's count of requests in flight, the proxy the spin's hook (first called after a post,
// once both exist).
const api = new ProxyServerApi(port, sync, () => spin.afterPost());
// The spin handles answers; anything else (CLOSE, a test's fault) it leaves for a later turn, after the loop read
// its sockets: a CLOSE handled mid-spin would close keep-alive connections whose next request arrived unread.
const spin = new AnswerSpin(
  port,
  (msg) => api.handle(msg) || setImmediate(() => onMessage(msg)),
  () => api.inflight > 0,
);
let http: RunningHttpServer | undefined;
let grpc: RunningGrpcServer | undefined;
let closing: Promise<void> | undefined;
let dying = false;

/** Drains as the main thread would (serve.ts): HTTP keep-alive connections keep being served meanwhile. */
function close(drainMs: number, idleMs?: number): Promise<void> {
  closing ??= Promise.all([http?.close({ drainMs, idleMs }), grpc?.close(drainMs)]).then(() => undefined);
  return closing;
}

/**
 * The console's routes on this thread, with sources that ask the main thread (host.ts): one log ring, one latency
 * window and one access rule for the process. Console pages are not on the inference path; a synchronous call each
 * is what they cost.
 */
function consoleSources(c: NonNullable<typeof data.console>): ConsoleSources {
  const logsKept = c.logsKept;
  return {
    modelControlMode: c.modelControlMode,
    repositories: c.repositories,
    logs:
      logsKept === undefined
        ? undefined
        : { capacity: logsKept, json: (after?: number) => sync.call<string>('consoleLogs', [after]) },
    latency: { summary: (windowMs: number) => sync.call<LatencySummary[]>('consoleLatency', [windowMs]) },
    access: c.access
      ? (req: IncomingMessage, category: ConsoleCategory) =>
          sync.call<string | undefined>('consoleAccess', [
            { method: req.method, url: req.url, headers: req.headers },
            category,
          ])
      : undefined,
  };
}

function fatal(err: unknown): void {
  if (dying) return;
  dying = true;
  logger.error(
    { err },
    `front-end thread ${data.index} failed: it answers its in-flight requests with an error and a new thread replaces it`,
  );
  post([Tag.FATAL, errorToData(err)]);
  api.failAll(new InternalError(`front-end thread ${data.index} failed while the request was in flight`));
  setTimeout(() => process.exit(1), FATAL_GRACE_MS).unref();
  void close(FATAL_GRACE_MS, 0).finally(() => process.exit(1));
}

process.on('uncaughtException', fatal);
process.on('unhandledRejection', fatal);

/** A message from the main thread: from the port's 'message' event, or taken by the spin. */
function onMessage(msg: unknown[]): void {
  if (api.handle(msg)) return;
  if (msg[0] === Tag.CLOSE) {
    // Drained: the main thread ends the thread once this message arrives (everything posted before it has).
    void close(msg[1] as number, msg[2] as number).then(() => post([Tag.CLOSED]));
  } else if (msg[0] === Tag.CRASH) injectFault(msg);
}

port.on('message', onMessage);

/** Fault injection for tests (pool.ts injectFault). */
function injectFault([, kind, ms, began]: unknown[]): void {
  if (kind === 'block') {
    // Busy, as one expensive request keeps its thread: nothing else runs on this thread meanwhile.
    Atomics.store(new Int32Array(began as SharedArrayBuffer), 0, 1);
    const until = performance.now() + (ms as number);
    while (performance.now() < until);
    return;
  }
  // An exception no request owns, as a bug in a timer callback would be.
  setImmediate(() => {
    throw new Error(`fault injected into front-end thread ${data.index}`);
  });
}

try {
  if (data.http) {
    http = await startHttpServer(api, {
      ...data.http,
      reusePort: true,
      sharedConnections: { counts: data.connections, slot: data.index },
      routes: data.console ? consoleRoutes(consoleSources(data.console)) : [],
      refuse: crossSiteRefusal,
      logger,
    });
  }
  if (data.grpc) {
    const tls = data.grpc.tls;
    grpc = await startGrpcServer(api, {
      ...data.grpc,
      // Buffers arrive as Uint8Arrays (structured clone); grpc-js wants Buffers.
      tls: tls && {
        ...tls,
        cert: Buffer.from(tls.cert),
        key: Buffer.from(tls.key),
        rootCert: tls.rootCert && Buffer.from(tls.rootCert),
      },
      reusePort: true,
      logger,
    });
  }
  post([Tag.READY, http?.port, http?.address, grpc?.port]);
} catch (err) {
  post([Tag.FAILED, errorToData(err)]);
  await close(0, 0);
}
