import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Server, type AddressInfo, type ListenOptions, type Socket } from 'node:net';
import { InvalidArgError } from '../../core/errors.js';
import { noopLogger, type Logger } from '../../core/logger.js';
import type { InferenceServerApi } from '../../server/api.js';
import { CORE_HANDLERS } from './handlers.js';
import { sendError } from './respond.js';
import { buildRoutes, dispatch } from './routes.js';

/**
 * Nereid's HTTP/REST front end (KServe v2 + Triton extensions) on plain `node:http`. No framework on purpose: the
 * routes are Triton's fixed regex table, and infer must see the raw body — split at `Inference-Header-Content-Length`
 * into JSON and binary blobs, size-capped before it is buffered, decompressed under a cap — which body-parsing
 * middleware would buffer, copy or parse first.
 */

/** Triton's `--http-max-input-size` default: 64 MiB, applied after decompression. */
export const DEFAULT_MAX_INPUT_SIZE = 64 * 1024 * 1024;

/**
 * Idle keep-alive connections live 65 s: longer than the 60 s idle timeout of common load balancers and client
 * pools, so the server is not the side that closes a connection the client is about to reuse.
 */
const KEEP_ALIVE_TIMEOUT_MS = 65_000;

export interface HttpServerOptions {
  host?: string;
  port: number;
  /** Largest request body, after decompression, in bytes (default 64 MiB). */
  maxInputSize?: number;
  /**
   * Listen with SO_REUSEPORT (Triton's `--reuse-http-port`): several listeners, in this process's front-end threads
   * or in other processes, share the port and the kernel spreads connections among them. Needs Node >= 22.12.
   */
  reusePort?: boolean;
  logger?: Logger;
}

export interface RunningHttpServer {
  port: number;
  address: string;
  /** Stops accepting, closes idle connections, waits for in-flight requests. Idempotent. */
  close(): Promise<void>;
}

/** Starts the HTTP server and resolves once it listens. */
export async function startHttpServer(api: InferenceServerApi, opts: HttpServerOptions): Promise<RunningHttpServer> {
  const logger = opts.logger ?? noopLogger;
  const maxInputSize = opts.maxInputSize ?? DEFAULT_MAX_INPUT_SIZE;
  if (!Number.isSafeInteger(maxInputSize) || maxInputSize <= 0) {
    throw new InvalidArgError(`--http-max-input-size must be a positive integer, got ${maxInputSize}`);
  }
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) {
    throw new InvalidArgError(`--http-port must be an integer in [0, 65535], got ${opts.port}`);
  }
  const routes = buildRoutes(CORE_HANDLERS);
  let closing: Promise<void> | undefined;

  // Responses not yet finished. At shutdown each closes its connection once written; idle keep-alive connections
  // stay open (a request they deliver meanwhile is answered, with 503 from the facade) until nothing is active,
  // so no request that reached us is dropped unanswered.
  const active = new Set<ServerResponse>();
  const sockets = new Set<Socket>();
  // Idle connections are ended, not destroyed: http.Server#closeIdleConnections destroys a socket whose last
  // response is written but may still sit in the kernel's send buffer, and the client then lost the end of a large
  // response (measured at shutdown on Node 24: 970,105 of 1,048,734 bytes). end() sends FIN after the pending data.
  const closeIdleWhenQuiet = (): void => {
    if (active.size > 0) return;
    for (const socket of sockets) socket.end();
  };
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    active.add(res);
    res.once('close', () => {
      active.delete(res);
      if (closing !== undefined) closeIdleWhenQuiet();
    });
    if (closing !== undefined) res.shouldKeepAlive = false;
    dispatch(routes, { req, res, api, logger, maxInputSize })
      .catch((err: unknown) => sendError(req, res, err, logger))
      .catch((err: unknown) => {
        // Even the error response failed (socket gone, compression failed): never leave the request hanging.
        logger.error({ err, url: req.url }, 'failed to send an HTTP error response');
        res.destroy();
      });
  };

  const server = createServer({ keepAlive: true }, onRequest);
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  // Node requires headersTimeout > keepAliveTimeout to avoid racing a reused connection's next request.
  server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // `reusePort` is newer than the @types/node this project builds against.
    const listen: ListenOptions & { reusePort?: boolean } = { port: opts.port, host: opts.host };
    if (opts.reusePort) listen.reusePort = true;
    server.listen(listen, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => logger.error({ err }, 'HTTP server error'));
  const info = server.address() as AddressInfo;

  return {
    port: info.port,
    address: info.address,
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        // Stop accepting connections. http.Server#close would also close every idle keep-alive connection at
        // once, dropping requests already sent on them but not yet parsed; net.Server#close only stops the
        // listener, and closeIdleWhenQuiet closes idle connections once no response is active.
        Server.prototype.close.call(server, () => resolve());
        for (const res of active) if (!res.headersSent) res.shouldKeepAlive = false;
        closeIdleWhenQuiet();
      });
      return closing;
    },
  };
}
