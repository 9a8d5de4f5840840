import { defaultBackends } from './backends/index.js';
import { startFrontEnds, type RunningFrontEnds } from './frontend/pool.js';
import { InvalidArgError } from './core/errors.js';
import { createLogger } from './core/logger.js';
import { cudaDeviceIds } from './gpu/index.js';
import { metricsSourceFrom, startMetricsServer, type RunningMetricsServer } from './metrics/index.js';
import {
  startGrpcServer,
  type GrpcKeepaliveOptions,
  type GrpcTlsOptions,
  type RunningGrpcServer,
} from './protocol/grpc/index.js';
import { startHttpServer } from './protocol/http/server.js';
import { checkServerOptions, SERVER_DEFAULTS } from './server/defaults.js';
import { InferenceServer, type InferenceServerOptions } from './server/server.js';

/**
 * What `serve()` starts. Every field is optional except `repositories`; defaults are Triton's (HTTP on 8000,
 * gRPC on 8001 and metrics on 8002, all on 0.0.0.0), the same as `nereid serve` with no flags. An embedder that
 * wants only HTTP on a free port passes `{ repositories, httpPort: 0, httpAddress: '127.0.0.1', allowGrpc: false,
 * allowMetrics: false }`.
 */
export interface ServeOptions extends Omit<InferenceServerOptions, 'backends'> {
  /** `--http-port`; 0 picks a free port (default 8000). */
  httpPort?: number;
  /** `--http-address` (default 0.0.0.0). */
  httpAddress?: string;
  /** `--http-max-input-size`: largest request body after decompression, in bytes. */
  httpMaxInputSize?: number;
  /**
   * `--http-thread-count`: front-end threads running the HTTP and gRPC protocols (src/frontend/). 1 (the default
   * here; `nereid serve` defaults to one per core from 4 cores): the main thread serves them itself, with no hop.
   */
  httpThreadCount?: number;
  /** `--reuse-http-port`: listen with SO_REUSEPORT, so other servers may share the HTTP port. */
  reuseHttpPort?: boolean;
  /** `--reuse-grpc-port`: the same for the gRPC port. */
  reuseGrpcPort?: boolean;
  /** `--allow-http` (default true). */
  allowHttp?: boolean;
  /** `--allow-grpc` (default true). */
  allowGrpc?: boolean;
  /** `--grpc-port`; 0 picks a free port (default 8001). */
  grpcPort?: number;
  /** `--grpc-address` (default 0.0.0.0; an `ipv6:` prefix is accepted as Triton does). */
  grpcAddress?: string;
  grpcKeepalive?: GrpcKeepaliveOptions;
  /** `--grpc-infer-response-compression-level`. */
  grpcCompressionLevel?: 'none' | 'low' | 'medium' | 'high';
  /** `--grpc-use-ssl[-mutual]` with the PEM contents already read. */
  grpcTls?: GrpcTlsOptions;
  /** Seconds in-flight work may take to finish at shutdown (`--exit-timeout-secs`, default 30). */
  exitTimeoutSecs?: number;
  /** `--allow-metrics` (default true). */
  allowMetrics?: boolean;
  /** `--metrics-port`; 0 picks a free port (default 8002). */
  metricsPort?: number;
  /** `--metrics-address` (default: the HTTP address). */
  metricsAddress?: string;
  /** `--metrics-interval-ms`: how often system metrics are sampled. */
  metricsIntervalMs?: number;
  /** `--metrics-config` entries (`summary_latencies=true`, ...). */
  metricsConfig?: readonly string[];
  /** `--allow-cpu-metrics` (default true). */
  allowCpuMetrics?: boolean;
  /** `--allow-gpu-metrics`: NVML's GPU families where a GPU is visible (default true). */
  allowGpuMetrics?: boolean;
}

/** A running Nereid: the server facade and its bound endpoints. `close()` is idempotent. */
export interface RunningNereid {
  /** The facade the protocols talk to; in-process callers may use it directly. */
  server: InferenceServer;
  /** Base URL of the HTTP endpoint, e.g. `http://127.0.0.1:8000` (a wildcard address becomes loopback). */
  httpUrl?: string;
  /** The address the HTTP endpoint is bound to, as the OS reports it (`0.0.0.0`, `127.0.0.1`, `::`). */
  httpAddress?: string;
  /** The bound HTTP port (the one the OS chose when 0 was asked). */
  httpPort?: number;
  /** The address the gRPC endpoint listens on when gRPC is on. */
  grpcAddress?: string;
  /** Port of the gRPC endpoint when gRPC is on. */
  grpcPort?: number;
  /** The address the Prometheus endpoint listens on when metrics are on. */
  metricsAddress?: string;
  /** Port of the Prometheus endpoint when metrics are on. */
  metricsPort?: number;
  /** The front-end threads when `httpThreadCount` > 1. */
  frontEnds?: RunningFrontEnds;
  /**
   * Readiness turns false and new requests are refused, in-flight ones finish (up to `exitTimeoutSecs` for gRPC
   * streams), then the models are unloaded and the listeners closed. Idempotent: every call gets the same promise.
   */
  close(): Promise<void>;
}

/**
 * Loads the repositories and starts the endpoints; resolves once every listener is bound and the models are loaded.
 * The one start path: `nereid serve`, the tests and embedders all call it. On a failed start whatever was started is
 * closed again before the error is thrown.
 */
export async function serve(opts: ServeOptions): Promise<RunningNereid> {
  checkServerOptions(opts);
  const threads = opts.httpThreadCount ?? SERVER_DEFAULTS.httpThreadCount;
  if (!Number.isSafeInteger(threads) || threads < 1) {
    throw new InvalidArgError(`--http-thread-count must be a positive integer, got ${threads}`);
  }
  const D = SERVER_DEFAULTS;
  const backends = defaultBackends();
  // Backends without a close() are skipped; the async wrapper gives Promise.all a promise for each.
  const closeBackends = (): Promise<unknown> => Promise.all(backends.map(async (b) => b.close?.()));
  // Without a logger from the caller: a silent one whose switches the logging extension can still turn on.
  opts = { ...opts, logger: opts.logger ?? createLogger({ switches: { info: false, warning: false, error: false } }) };
  const server = await InferenceServer.create({
    repositories: opts.repositories,
    backends,
    backendConfig: opts.backendConfig,
    autoComplete: opts.autoComplete,
    strictReadiness: opts.strictReadiness,
    exitOnError: opts.exitOnError,
    id: opts.id,
    modelControlMode: opts.modelControlMode,
    loadModels: opts.loadModels,
    repositoryPollSecs: opts.repositoryPollSecs,
    trace: opts.trace,
    gpus: opts.gpus ?? (await cudaDeviceIds()),
    logger: opts.logger,
  });
  let http: Awaited<ReturnType<typeof startHttpServer>> | undefined;
  let metrics: RunningMetricsServer | undefined;
  let grpc: RunningGrpcServer | undefined;
  let frontEnds: RunningFrontEnds | undefined;
  let grpcHost: string | undefined;
  let metricsHost: string | undefined;
  try {
    if (threads > 1) {
      // The protocols run on front-end threads; the main thread keeps the server (models, schedulers, statistics).
      const httpHost = opts.httpAddress ?? D.address;
      if (opts.allowGrpc ?? D.allowGrpc) grpcHost = (opts.grpcAddress ?? D.address).replace(/^ipv6:/, '');
      frontEnds = await startFrontEnds(server, {
        threads,
        http:
          (opts.allowHttp ?? D.allowHttp)
            ? { host: httpHost, port: opts.httpPort ?? D.httpPort, maxInputSize: opts.httpMaxInputSize }
            : undefined,
        grpc:
          grpcHost === undefined
            ? undefined
            : {
                host: grpcHost,
                port: opts.grpcPort ?? D.grpcPort,
                keepalive: opts.grpcKeepalive,
                compressionLevel: opts.grpcCompressionLevel,
                tls: opts.grpcTls,
              },
        logger: opts.logger,
      });
      if (frontEnds.grpcPort !== undefined) {
        opts.logger?.info(`Started GRPCInferenceService at ${grpcHost}:${frontEnds.grpcPort} (${threads} threads)`);
      }
      if (frontEnds.httpPort !== undefined) {
        opts.logger?.info(`Started HTTPService at ${httpHost}:${frontEnds.httpPort} (${threads} threads)`);
      }
    } else if (opts.allowGrpc ?? D.allowGrpc) {
      const host = (grpcHost = (opts.grpcAddress ?? D.address).replace(/^ipv6:/, ''));
      grpc = await startGrpcServer(server, {
        host,
        port: opts.grpcPort ?? D.grpcPort,
        keepalive: opts.grpcKeepalive,
        compressionLevel: opts.grpcCompressionLevel,
        tls: opts.grpcTls,
        reusePort: opts.reuseGrpcPort,
        logger: opts.logger,
      });
      opts.logger?.info(`Started GRPCInferenceService at ${host}:${grpc.port}`);
    }
    if (opts.allowMetrics ?? D.allowMetrics) {
      const host = (metricsHost = opts.metricsAddress ?? opts.httpAddress ?? D.address);
      metrics = await startMetricsServer(metricsSourceFrom(server), {
        host,
        port: opts.metricsPort ?? D.metricsPort,
        intervalMs: opts.metricsIntervalMs,
        config: opts.metricsConfig ? [...opts.metricsConfig] : undefined,
        allowCpuMetrics: opts.allowCpuMetrics,
        allowGpuMetrics: opts.allowGpuMetrics,
        logger: opts.logger,
      });
      server.setObserver(metrics.observer);
      opts.logger?.info(`Started Metrics Service at ${host}:${metrics.port}`);
    }
    if (threads <= 1 && (opts.allowHttp ?? D.allowHttp)) {
      http = await startHttpServer(server, {
        host: opts.httpAddress ?? D.address,
        port: opts.httpPort ?? D.httpPort,
        maxInputSize: opts.httpMaxInputSize,
        reusePort: opts.reuseHttpPort,
        logger: opts.logger,
      });
      opts.logger?.info(`Started HTTPService at ${opts.httpAddress ?? D.address}:${http.port}`);
    }
  } catch (err) {
    await grpc?.close(0);
    await frontEnds?.close(0);
    await metrics?.close();
    await server.close();
    await closeBackends();
    throw err;
  }
  let closing: Promise<void> | undefined;
  const httpAt =
    http ??
    (frontEnds?.httpPort !== undefined
      ? { address: frontEnds.httpAddress as string, port: frontEnds.httpPort }
      : undefined);
  const grpcPort = grpc?.port ?? frontEnds?.grpcPort;
  return {
    server,
    httpUrl: httpAt ? `http://${urlHost(httpAt.address)}:${httpAt.port}` : undefined,
    httpAddress: httpAt?.address,
    httpPort: httpAt?.port,
    grpcAddress: grpcPort !== undefined ? grpcHost : undefined,
    grpcPort,
    frontEnds,
    metricsAddress: metrics ? metricsHost : undefined,
    metricsPort: metrics?.port,
    close() {
      closing ??= (async () => {
        // Readiness turns false and new requests are refused first; in-flight ones finish before the models go.
        server.beginShutdown();
        const graceMs = (opts.exitTimeoutSecs ?? D.exitTimeoutSecs) * 1000;
        await Promise.all([http?.close(), grpc?.close(graceMs), frontEnds?.close(graceMs)]);
        await metrics?.close();
        await server.close();
        await closeBackends();
      })();
      return closing;
    },
  };
}

/** The host part of a URL that reaches `address`: a wildcard becomes loopback, IPv6 gets brackets. */
function urlHost(address: string): string {
  if (address === '0.0.0.0') return '127.0.0.1';
  if (address === '::') return '[::1]';
  return address.includes(':') ? `[${address}]` : address;
}
