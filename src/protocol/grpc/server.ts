import * as grpc from '@grpc/grpc-js';
import { noopLogger, type Logger } from '../../core/logger.js';
import type { InferenceServerApi } from '../../server/api.js';
import { healthHandlers, serviceHandlers } from './handlers.js';
import { modelInfer, modelStreamInfer, type InferLimits } from './infer.js';
import { streamLimits } from '../kserve/stream-budget.js';
import { compileForwardPattern } from '../kserve/header-forward.js';
import { InvalidArgError } from '../../core/errors.js';
import { loadServices } from './proto.js';
import { listenReusePort } from './reuse-port.js';
import { NO_RESTRICTIONS, type Restrictions } from '../restricted.js';
import { restrictService } from './restrict.js';
import { watchStalledSessions } from './session-watch.js';
import { releasingService } from './lent-response.js';
import { tolerantService } from './malformed.js';

/** Triton's largest gRPC message (INT32_MAX); grpc-js would default to 4 MiB for what it receives. */
export const GRPC_MAX_MESSAGE_SIZE = 2 ** 31 - 1;

/**
 * `--grpc-max-response-pool-size` default. Triton's is INT_MAX (unbounded); Nereid bounds it so a stream whose
 * client does not read holds at most this many responses (Triton's deploy guide asks for a bound with untrusted
 * clients). Streams that pipeline more requests than this still work; they wait for the client to read.
 */
export const DEFAULT_MAX_RESPONSE_POOL_SIZE = 256;

/** Keepalive settings, named after Triton's `--grpc-keepalive-*` and `--grpc-http2-*` flags. */
export interface GrpcKeepaliveOptions {
  /** `--grpc-keepalive-time`: ms between server pings on an idle connection (Triton: 7 200 000). */
  timeMs?: number;
  /** `--grpc-keepalive-timeout`: ms to wait for a ping ack before closing (Triton: 20 000). */
  timeoutMs?: number;
  /**
   * `--grpc-keepalive-permit-without-calls`, `--grpc-http2-max-pings-without-data`,
   * `--grpc-http2-min-recv-ping-interval-without-data`, `--grpc-http2-max-ping-strikes`: accepted for
   * parity; grpc-js servers enforce no client-ping policy, so every client ping is answered.
   */
  permitWithoutCalls?: boolean;
  http2MaxPingsWithoutData?: number;
  http2MinRecvPingIntervalWithoutDataMs?: number;
  http2MaxPingStrikes?: number;
  /** `--grpc-max-connection-age` / `--grpc-max-connection-age-grace` (ms). */
  maxConnectionAgeMs?: number;
  maxConnectionAgeGraceMs?: number;
}

/** TLS from PEM bytes (`--grpc-use-ssl`, `--grpc-server-cert`, `--grpc-server-key`, `--grpc-root-cert`). */
export interface GrpcTlsOptions {
  cert: Buffer;
  key: Buffer;
  /** CA that signs client certificates; required when `mutual`. */
  rootCert?: Buffer;
  /** `--grpc-use-ssl-mutual`: clients must present a certificate signed by `rootCert`. */
  mutual: boolean;
}

export interface GrpcServerOptions {
  /** `--grpc-address`; default 0.0.0.0. */
  host?: string;
  /** `--grpc-port`; 0 picks a free port. */
  port: number;
  logger?: Logger;
  /**
   * Largest message received, in bytes, after decompression (grpc-js stops inflating past it, so a small
   * compressed message cannot inflate into gigabytes); default INT32_MAX as Triton. `serve()` passes
   * `--grpc-max-input-size`.
   */
  maxMessageSize?: number;
  /** `--max-response-bytes`: largest inference response (default INT32_MAX, gRPC's message limit). */
  maxResponseBytes?: number;
  /** `--grpc-max-response-pool-size` (default 256). */
  maxResponsePoolSize?: number;
  /** `--stream-max-pending-bytes` (default 64 MiB; kserve/stream-budget.ts). */
  streamMaxPendingBytes?: number;
  /** `--stream-stall-timeout-secs` (default 30). */
  streamStallTimeoutSecs?: number;
  keepalive?: GrpcKeepaliveOptions;
  /**
   * `--grpc-infer-response-compression-level`. grpc-js cannot compress what a server sends, so levels
   * other than 'none' are accepted and logged as not applied; compressed requests are always accepted.
   */
  compressionLevel?: 'none' | 'low' | 'medium' | 'high';
  tls?: GrpcTlsOptions;
  /** `--grpc-restricted-protocol`, parsed with the `triton-grpc-protocol-` prefix (protocol/restricted.ts). */
  restrictions?: Restrictions;
  /** `--grpc-header-forward-pattern`: metadata whose key matches become request parameters. */
  headerForwardPattern?: string;
  /** Listen with SO_REUSEPORT (Triton's `--reuse-grpc-port`; front-end threads share the port): reuse-port.ts. */
  reusePort?: boolean;
}

/** A started gRPC endpoint. */
export interface RunningGrpcServer {
  port: number;
  /**
   * Stops accepting calls and lets in-flight ones finish; after `graceMs` (default 30 s, Triton's
   * `--exit-timeout-secs`) calls still open, such as a stream a client never half-closes, are cancelled.
   * Idempotent.
   */
  close(graceMs?: number): Promise<void>;
}

function positive(name: string, v: number): number {
  if (!Number.isSafeInteger(v) || v <= 0) throw new InvalidArgError(`${name} must be a positive integer, got ${v}`);
  return v;
}

function channelOptions(opts: GrpcServerOptions): grpc.ServerOptions {
  const size = opts.maxMessageSize ?? GRPC_MAX_MESSAGE_SIZE;
  const ka = opts.keepalive ?? {};
  const out: grpc.ServerOptions = {
    'grpc.max_receive_message_length': size,
    'grpc.max_send_message_length': GRPC_MAX_MESSAGE_SIZE,
    // Channelz bookkeeping (call counters and traces per channel) cost ~5 % of the main thread per call under load,
    // and nothing here serves the channelz service.
    'grpc.enable_channelz': 0,
  };
  if (ka.timeMs !== undefined) out['grpc.keepalive_time_ms'] = ka.timeMs;
  if (ka.timeoutMs !== undefined) out['grpc.keepalive_timeout_ms'] = ka.timeoutMs;
  if (ka.maxConnectionAgeMs !== undefined) out['grpc.max_connection_age_ms'] = ka.maxConnectionAgeMs;
  if (ka.maxConnectionAgeGraceMs !== undefined) out['grpc.max_connection_age_grace_ms'] = ka.maxConnectionAgeGraceMs;
  return out;
}

function credentials(tls: GrpcTlsOptions | undefined): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  if (tls.mutual && !tls.rootCert) {
    throw new Error('mutual TLS needs a root certificate to check client certificates (--grpc-root-cert)');
  }
  return grpc.ServerCredentials.createSsl(
    tls.rootCert ?? null,
    [{ cert_chain: tls.cert, private_key: tls.key }],
    tls.mutual,
  );
}

/**
 * Serves Triton's `inference.GRPCInferenceService` and `grpc.health.v1.Health` for `api` over
 * @grpc/grpc-js. Resolves once bound, with the actual port.
 */
export async function startGrpcServer(api: InferenceServerApi, opts: GrpcServerOptions): Promise<RunningGrpcServer> {
  const logger = opts.logger ?? noopLogger;
  if (opts.compressionLevel !== undefined && opts.compressionLevel !== 'none') {
    logger.warn(
      `gRPC response compression level '${opts.compressionLevel}' is not applied: grpc-js servers send responses uncompressed`,
    );
  }
  const { Inference, Health } = loadServices();
  const server = new grpc.Server(channelOptions(opts));
  const restrictions = opts.restrictions ?? NO_RESTRICTIONS;
  const maxResponsePoolSize = positive(
    '--grpc-max-response-pool-size',
    opts.maxResponsePoolSize ?? DEFAULT_MAX_RESPONSE_POOL_SIZE,
  );
  const limits: InferLimits = {
    maxResponseBytes: positive('--max-response-bytes', opts.maxResponseBytes ?? GRPC_MAX_MESSAGE_SIZE),
    maxResponsePoolSize,
    stream: streamLimits({
      maxPendingBytes: opts.streamMaxPendingBytes,
      stallTimeoutSecs: opts.streamStallTimeoutSecs,
      maxResponsePoolSize,
    }),
    headerForward: compileForwardPattern('grpc-header-forward-pattern', opts.headerForwardPattern),
  };
  positive('--grpc-max-input-size', opts.maxMessageSize ?? GRPC_MAX_MESSAGE_SIZE);
  server.addService(
    releasingService(tolerantService(Inference.service)),
    restrictService(
      {
        ...serviceHandlers(api, logger),
        ModelInfer: modelInfer(api, logger, limits),
        ModelStreamInfer: modelStreamInfer(api, logger, limits),
      },
      restrictions,
    ),
  );
  server.addService(tolerantService(Health.service), restrictService(healthHandlers(api, logger), restrictions));
  const host = opts.host ?? '0.0.0.0';
  const address = host.includes(':') && !host.startsWith('[') ? `[${host}]:${opts.port}` : `${host}:${opts.port}`;
  const listener = opts.reusePort ? await listenReusePort(server, credentials(opts.tls), host, opts.port) : undefined;
  const port =
    listener?.port ??
    (await new Promise<number>((resolve, reject) =>
      server.bindAsync(address, credentials(opts.tls), (err, bound) => (err ? reject(err) : resolve(bound))),
    ));
  // After the listener: a reuse-port listener's injector is one of the grpc-js server's HTTP/2 servers too.
  const unwatch = watchStalledSessions(server, logger);
  let closing: Promise<void> | undefined;
  return {
    port,
    close(graceMs = 30_000) {
      // A reuse-port listener stops accepting first; it closes once the connections it handed over have ended.
      const stopped = listener?.close();
      closing ??= new Promise<void>((resolve) => {
        unwatch();
        const timer = setTimeout(() => server.forceShutdown(), graceMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      return stopped ? closing.then(() => stopped) : closing;
    },
  };
}
