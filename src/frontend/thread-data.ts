import type { MessagePort } from 'node:worker_threads';
import type { GrpcServerOptions } from '../protocol/grpc/index.js';
import type { HttpServerOptions } from '../protocol/http/server.js';

/** HTTP listener settings a front-end thread gets (the logger and reusePort are its own). */
export type FrontEndHttpOptions = Omit<HttpServerOptions, 'logger' | 'reusePort'>;
/** gRPC listener settings a front-end thread gets. */
export type FrontEndGrpcOptions = Omit<GrpcServerOptions, 'logger' | 'reusePort'>;

/** What pool.ts hands a front-end thread (thread.ts) at start, as its workerData. */
export interface ThreadData {
  index: number;
  /** With the port every thread shares (the first thread resolved port 0). */
  http?: FrontEndHttpOptions;
  grpc?: FrontEndGrpcOptions;
  /** The thread's end of its synchronous-call channel and the flag it sleeps on (sync-call.ts). */
  syncPort: MessagePort;
  syncFlag: SharedArrayBuffer;
}
