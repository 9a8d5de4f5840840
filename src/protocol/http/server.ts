import { compileForwardPattern } from '../kserve/header-forward.js';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Server, type AddressInfo, type ListenOptions, type Socket } from 'node:net';
import { InvalidArgError } from '../../core/errors.js';
import { noopLogger, type Logger } from '../../core/logger.js';
import type { InferenceServerApi } from '../../server/api.js';
import { DEFAULT_MAX_RESPONSE_BYTES } from '../kserve/response-size.js';
import { streamLimits } from '../kserve/stream-budget.js';
import { NO_RESTRICTIONS, type Restrictions } from '../restricted.js';
import { answerClientError } from './client-error.js';
import { applyCors, type CorsPolicy } from './cors.js';
import { admitShared, Connections } from './connections.js';
import { CORE_HANDLERS } from './handlers.js';
import { sendError, sendJson } from './respond.js';
import { buildRoutes, dispatch, type Route } from './routes.js';

/**
 * Nereid's HTTP/REST front end (KServe v2 + Triton extensions) on plain `node:http`. No framework on purpose: the
 * routes are Triton's fixed regex table, and infer must see the raw body — split at `Inference-Header-Content-Length`
 * into JSON and binary blobs, size-capped before it is buffered, decompressed under a cap — which body-parsing
 * middleware would buffer, copy or parse first.
 */

/** Triton's `--http-max-input-size` default: 64 MiB, applied after decompression. */
export const DEFAULT_MAX_INPUT_SIZE = 64 * 1024 * 1024;

/**
 * Transport limits (Nereid's own flags; Triton's libevhtp front end has none of them):
 * - connections: at most this many open at once; more are closed as they arrive (a flood of idle or slow
 *   connections cannot take every file descriptor, and with them model loads);
 * - headers: the request line and headers must arrive within this time (slowloris);
 * - request: the whole request, body included, within this time (a stalled upload is cut, answered 408).
 */
export const HTTP_LIMIT_DEFAULTS = Object.freeze({
  maxConnections: 4096,
  headersTimeoutSecs: 60,
  requestTimeoutSecs: 300,
});

/**
 * Idle keep-alive connections live 65 s: longer than the 60 s idle timeout of common load balancers and client
 * pools, so the server is not the side that closes a connection the client is about to reuse.
 */
const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/**
 * During a shutdown an idle keep-alive connection stays open this long for its client's next request (Triton serves
 * requests on open connections until its exit timeout; its own test sends one 2 s after SIGINT).
 */
export const DEFAULT_DRAIN_IDLE_MS = 5_000;

export interface HttpServerOptions {
  host?: string;
  port: number;
  /** Largest request body, after decompression, in bytes (default 64 MiB). */
  maxInputSize?: number;
  /** `--max-response-bytes`: largest inference response body (default INT32_MAX). */
  maxResponseBytes?: number;
  /** `--http-max-connections`: open connections at most (default 4096). */
  maxConnections?: number;
  /** `--http-headers-timeout-secs` (default 60). */
  headersTimeoutSecs?: number;
  /** `--http-request-timeout-secs`: the whole request, body included (default 300). */
  requestTimeoutSecs?: number;
  /** `--http-restricted-api`, parsed (protocol/restricted.ts). */
  restrictions?: Restrictions;
  /** `--stream-max-pending-bytes` (default 64 MiB; kserve/stream-budget.ts): a generate_stream's limit. */
  streamMaxPendingBytes?: number;
  /** `--stream-stall-timeout-secs` (default 30). */
  streamStallTimeoutSecs?: number;
  /** `--http-header-forward-pattern`: headers whose name matches become request parameters. */
  headerForwardPattern?: string;
  /**
   * Listen with SO_REUSEPORT (Triton's `--reuse-http-port`): several listeners, in this process's front-end threads
   * or in other processes, share the port and the kernel spreads connections among them. Needs Node >= 22.12.
   */
  reusePort?: boolean;
  /**
   * Front-end threads: open connections per listener, one Int32 each, in memory every thread's listener shares;
   * this listener counts in `slot` and refuses a connection while the sum is at `maxConnections`, so the cap holds
   * for the process rather than per thread. A thread that dies takes its connections with it; pool.ts zeroes its
   * slot before a replacement starts.
   */
  sharedConnections?: { counts: SharedArrayBuffer; slot: number };
  logger?: Logger;
  /** More routes, matched before Triton's table (the web console mounts `/console` this way). */
  routes?: readonly Route[];
  /** Says why a request is refused with 403 before routing (cross-site requests), or undefined to let it through. */
  refuse?: (req: IncomingMessage) => string | undefined;
  /** `--http-cors-allow-origin` (cors.ts): origins that may call Triton's routes from their pages; none by default. */
  cors?: CorsPolicy;
}

export interface RunningHttpServer {
  port: number;
  address: string;
  /**
   * Stops accepting connections and drains the open ones, as Triton does: requests on them are served normally
   * until the connection closes; a connection idle for `idleMs` (default 5 s) is closed; at `drainMs` (default 30 s,
   * `--exit-timeout-secs`) idle connections are closed and busy ones close after their response. Resolves once every
   * connection has closed. Idempotent.
   */
  close(opts?: { drainMs?: number; idleMs?: number }): Promise<void>;
}

function positive(name: string, v: number): number {
  if (!Number.isSafeInteger(v) || v <= 0) throw new InvalidArgError(`${name} must be a positive integer, got ${v}`);
  return v;
}

/** Starts the HTTP server and resolves once it listens. */
// Long: the options checks (each a line), then the server and its listen; connections and drain: connections.ts.
export async function startHttpServer(api: InferenceServerApi, opts: HttpServerOptions): Promise<RunningHttpServer> {
  const logger = opts.logger ?? noopLogger;
  const L = HTTP_LIMIT_DEFAULTS;
  const maxInputSize = positive('--http-max-input-size', opts.maxInputSize ?? DEFAULT_MAX_INPUT_SIZE);
  const maxResponseBytes = positive('--max-response-bytes', opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES);
  const maxConnections = positive('--http-max-connections', opts.maxConnections ?? L.maxConnections);
  const headersTimeoutMs =
    positive('--http-headers-timeout-secs', opts.headersTimeoutSecs ?? L.headersTimeoutSecs) * 1000;
  const requestTimeoutMs =
    positive('--http-request-timeout-secs', opts.requestTimeoutSecs ?? L.requestTimeoutSecs) * 1000;
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new InvalidArgError('--http-headers-timeout-secs must not be longer than --http-request-timeout-secs');
  }
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) {
    throw new InvalidArgError(`--http-port must be an integer in [0, 65535], got ${opts.port}`);
  }
  const core = buildRoutes(CORE_HANDLERS);
  const routes = [...(opts.routes ?? []), ...core];
  const cors = opts.cors ?? [];
  const restrictions = opts.restrictions ?? NO_RESTRICTIONS;
  const headerForward = compileForwardPattern('http-header-forward-pattern', opts.headerForwardPattern);
  // generate_stream counts responses against the gRPC stream's default pool size: one rule for both streams.
  const stream = streamLimits({
    maxPendingBytes: opts.streamMaxPendingBytes,
    stallTimeoutSecs: opts.streamStallTimeoutSecs,
    maxResponsePoolSize: 256,
  });

  const connections = new Connections();
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    connections.request(req, res);
    // An origin the operator allowed for this route is not cross-site to refuse; its preflight is answered here.
    const allowed = applyCors(cors, req, res, core, restrictions);
    if (allowed === 'preflight') return;
    const refused = allowed === 'allowed' ? undefined : opts.refuse?.(req);
    (refused === undefined
      ? dispatch(routes, { req, res, api, logger, maxInputSize, maxResponseBytes, restrictions, stream, headerForward })
      : sendJson(req, res, 403, { error: refused })
    )
      .catch((err: unknown) => sendError(req, res, err, logger))
      .catch((err: unknown) => {
        // Even the error response failed (socket gone, compression failed): never leave the request hanging.
        logger.error({ err, url: req.url }, 'failed to send an HTTP error response');
        res.destroy();
      });
  };

  const server = createServer(
    {
      keepAlive: true,
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
      // How often Node checks those timeouts (its default, 30 s, would let a stalled request live 30 s too long).
      connectionsCheckingInterval: Math.min(1000, headersTimeoutMs),
    },
    onRequest,
  );
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.maxConnections = maxConnections;
  let dropsLogged = 0;
  const dropped = (): void => {
    // One line per 1000 refused connections: a flood must not flood the log too.
    if (dropsLogged++ % 1000 === 0) {
      logger.warn(`HTTP connection refused: ${maxConnections} connections are open (--http-max-connections)`);
    }
  };
  const shared = opts.sharedConnections && {
    counts: new Int32Array(opts.sharedConnections.counts),
    slot: opts.sharedConnections.slot,
  };
  server.on('connection', (socket: Socket) => {
    if (shared !== undefined && !admitShared(shared, socket, maxConnections)) {
      dropped();
      return;
    }
    connections.add(socket);
  });
  server.on('drop', dropped);
  // Requests the parser refused (malformed, timed out): Node's answers, and one with a reason (client-error.ts).
  server.on('clientError', (err: Error, socket: Socket) =>
    answerClientError(err, socket, connections.answering(socket)),
  );

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
  let closing: Promise<void> | undefined;

  return {
    port: info.port,
    address: info.address,
    close({ drainMs = 30_000, idleMs = DEFAULT_DRAIN_IDLE_MS } = {}): Promise<void> {
      // Stop accepting connections only: http.Server#close would also close every idle keep-alive connection at
      // once, dropping requests already sent on them but not yet parsed.
      closing ??= (Server.prototype.close.call(server), connections.drain(drainMs, idleMs));
      return closing;
    },
  };
}
