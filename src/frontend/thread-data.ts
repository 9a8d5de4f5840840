import type { MessagePort } from 'node:worker_threads';
import type { GrpcServerOptions } from '../protocol/grpc/index.js';
import type { HttpServerOptions } from '../protocol/http/server.js';

/**
 * HTTP listener settings a front-end thread gets: every limit and the parsed restrictions (a Map, cloned) as the
 * main thread would use them. The logger, reusePort, the console's routes, the cross-site rule and the shared
 * connection count are the thread's own (thread.ts).
 */
export type FrontEndHttpOptions = Omit<
  HttpServerOptions,
  'logger' | 'reusePort' | 'routes' | 'refuse' | 'sharedConnections'
>;
/** gRPC listener settings a front-end thread gets. */
export type FrontEndGrpcOptions = Omit<GrpcServerOptions, 'logger' | 'reusePort'>;

/** What a thread needs to serve the web console; its sources stay on the main thread (host.ts answers for them). */
export interface FrontEndConsole {
  modelControlMode: 'none' | 'poll' | 'explicit';
  /** The main thread's log ring's capacity; undefined: no ring (the console says no lines are kept). */
  logsKept?: number;
  /** Whether an access rule (ConsoleAccess) is set: the thread asks the main thread to apply it. */
  access: boolean;
  /** The model repositories (the console reads tune reports from model folders itself). */
  repositories?: readonly string[];
}

/** What pool.ts hands a front-end thread (thread.ts) at start, as its workerData. */
export interface ThreadData {
  index: number;
  /** With the port every thread shares (the first thread resolved port 0). */
  http?: FrontEndHttpOptions;
  grpc?: FrontEndGrpcOptions;
  console?: FrontEndConsole;
  /** Open HTTP connections per thread (one Int32 each), summed against `--http-max-connections` (http/server.ts). */
  connections: SharedArrayBuffer;
  /** The thread's end of its synchronous-call channel and the flag it sleeps on (sync-call.ts). */
  syncPort: MessagePort;
  syncFlag: SharedArrayBuffer;
}
