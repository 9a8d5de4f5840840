import { defaultBackends } from './backends/index.js';
import { startFrontEnds, type RunningFrontEnds } from './frontend/pool.js';
import { InvalidArgError } from './core/errors.js';
import {
  consoleRoutes,
  type ConsoleSources,
  crossSiteRefusal,
  fanOutObserver,
  LatencyWindow,
  type ConsoleAccess,
  type LogRing,
} from './console/index.js';
import { createLogger } from './core/logger.js';
import { cudaDeviceIds } from './native/cuda-device-ids.js';
import { metricsSourceFrom, startMetricsServer, type RunningMetricsServer } from './metrics/index.js';
import {
  startGrpcServer,
  type GrpcKeepaliveOptions,
  type GrpcTlsOptions,
  type RunningGrpcServer,
} from './protocol/grpc/index.js';
import { DEFAULT_MAX_INPUT_SIZE, startHttpServer } from './protocol/http/server.js';
import { GRPC_RESTRICTED_HEADER_PREFIX, parseRestrictions } from './protocol/restricted.js';
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
  /** `--max-response-bytes` (Nereid): largest inference response, HTTP body or gRPC message (default INT32_MAX). */
  maxResponseBytes?: number;
  /** `--http-max-connections` (Nereid): open HTTP connections at most (default 4096). */
  httpMaxConnections?: number;
  /** `--http-headers-timeout-secs` (Nereid): time for a request's headers to arrive (default 60). */
  httpHeadersTimeoutSecs?: number;
  /** `--http-request-timeout-secs` (Nereid): time for a whole request, body included, to arrive (default 300). */
  httpRequestTimeoutSecs?: number;
  /**
   * During a shutdown, how long an idle HTTP keep-alive connection stays open for its client's next request (Triton
   * serves open connections until its exit timeout). Default 5000 ms; 0 closes idle connections at once.
   */
  httpDrainIdleMs?: number;
  /** `--allow-http` (default true). */
  allowHttp?: boolean;
  /** `--http-restricted-api` entries, `<api>[,<api>...]:<header>=<value>` (repeatable). */
  httpRestrictedApi?: readonly string[];
  /** `--grpc-restricted-protocol` entries, `<api>[,<api>...]:<key>=<value>`; the header is `triton-grpc-protocol-<key>`. */
  grpcRestrictedProtocol?: readonly string[];
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
  /**
   * `--grpc-max-input-size` (Nereid): largest gRPC message received, after decompression. Default: the HTTP limit
   * (`--http-max-input-size`, 64 MiB), where Triton accepts up to 2 GiB.
   */
  grpcMaxInputSize?: number;
  /** `--grpc-max-response-pool-size`: responses pending per ModelStreamInfer stream before it stops reading (256). */
  grpcMaxResponsePoolSize?: number;
  /**
   * `--stream-max-pending-bytes` (Nereid): responses a stream (gRPC ModelStreamInfer, HTTP generate_stream) holds
   * that its client has not taken, bytes, before the stream ends with RESOURCE_EXHAUSTED (64 MiB).
   */
  streamMaxPendingBytes?: number;
  /** `--stream-stall-timeout-secs` (Nereid): a stream whose client takes no response this long is ended (30). */
  streamStallTimeoutSecs?: number;
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
  /** `--console`: the web console at `/console` on the HTTP port (default true). */
  console?: boolean;
  /** The log lines the console shows (`nereid serve` keeps the last 500); without it the console shows none. */
  consoleLogs?: LogRing;
  /** The restricted-API check of the console's own read endpoints (config text, logs, latencies). */
  consoleAccess?: ConsoleAccess;
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
  // Before any repository is read, as Triton's command-line parser refuses it (in its words).
  for (const [flag, v] of [
    ['http-max-input-size', opts.httpMaxInputSize],
    ['grpc-max-input-size', opts.grpcMaxInputSize],
  ] as const) {
    if (v !== undefined && (!Number.isSafeInteger(v) || v <= 0)) {
      throw new InvalidArgError(`--${flag} must be greater than 0.`);
    }
  }
  const threads = opts.httpThreadCount ?? SERVER_DEFAULTS.httpThreadCount;
  if (!Number.isSafeInteger(threads) || threads < 1) {
    throw new InvalidArgError(`--http-thread-count must be a positive integer, got ${threads}`);
  }
  const D = SERVER_DEFAULTS;
  // Parsed before any model loads, so a mistyped restriction fails start-up at once.
  const httpRestrictions = parseRestrictions(opts.httpRestrictedApi ?? [], {
    flag: 'http-restricted-api',
    kind: 'api',
  });
  const grpcRestrictions = parseRestrictions(opts.grpcRestrictedProtocol ?? [], {
    flag: 'grpc-restricted-protocol',
    kind: 'protocol',
    prefix: GRPC_RESTRICTED_HEADER_PREFIX,
  });
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
    allowClientShm: opts.allowClientShm,
    cudaRuntime: opts.cudaRuntime,
    allowCodeInLoadRequests: opts.allowCodeInLoadRequests,
    gpus: opts.gpus ?? (await cudaDeviceIds()),
    responseCacheBytes: opts.responseCacheBytes,
    logger: opts.logger,
  });
  let http: Awaited<ReturnType<typeof startHttpServer>> | undefined;
  let metrics: RunningMetricsServer | undefined;
  let grpc: RunningGrpcServer | undefined;
  let frontEnds: RunningFrontEnds | undefined;
  let grpcHost: string | undefined;
  let metricsHost: string | undefined;
  try {
    const httpOn = opts.allowHttp ?? D.allowHttp;
    const httpHost = opts.httpAddress ?? D.address;
    const httpSettings = {
      host: httpHost,
      port: opts.httpPort ?? D.httpPort,
      maxInputSize: opts.httpMaxInputSize,
      maxResponseBytes: opts.maxResponseBytes,
      maxConnections: opts.httpMaxConnections,
      headersTimeoutSecs: opts.httpHeadersTimeoutSecs,
      requestTimeoutSecs: opts.httpRequestTimeoutSecs,
      restrictions: httpRestrictions,
      streamMaxPendingBytes: opts.streamMaxPendingBytes,
      streamStallTimeoutSecs: opts.streamStallTimeoutSecs,
    };
    if (opts.allowGrpc ?? D.allowGrpc) grpcHost = (opts.grpcAddress ?? D.address).replace(/^ipv6:/, '');
    const grpcSettings =
      grpcHost === undefined
        ? undefined
        : {
            host: grpcHost,
            port: opts.grpcPort ?? D.grpcPort,
            keepalive: opts.grpcKeepalive,
            compressionLevel: opts.grpcCompressionLevel,
            tls: opts.grpcTls,
            maxMessageSize: opts.grpcMaxInputSize ?? opts.httpMaxInputSize ?? DEFAULT_MAX_INPUT_SIZE,
            maxResponseBytes: opts.maxResponseBytes,
            maxResponsePoolSize: opts.grpcMaxResponsePoolSize,
            streamMaxPendingBytes: opts.streamMaxPendingBytes,
            streamStallTimeoutSecs: opts.streamStallTimeoutSecs,
            restrictions: grpcRestrictions,
          };
    if (threads <= 1 && grpcSettings !== undefined) {
      grpc = await startGrpcServer(server, { ...grpcSettings, reusePort: opts.reuseGrpcPort, logger: opts.logger });
      opts.logger?.info(`Started GRPCInferenceService at ${grpcHost}:${grpc.port}`);
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
    // The console's sources stay on the main thread (the server's observer feeds its latencies, the CLI's logger its
    // log lines); front-end threads serve its routes and ask the main thread for them (src/frontend/host.ts).
    let consoleSources: ConsoleSources | undefined;
    if (httpOn && (opts.console ?? true)) {
      // The console's latency percentiles need each request's time: it observes beside the metrics endpoint.
      const latency = new LatencyWindow();
      server.setObserver(fanOutObserver(metrics ? [metrics.observer, latency] : [latency]));
      consoleSources = {
        modelControlMode: opts.modelControlMode ?? D.modelControlMode,
        logs: opts.consoleLogs,
        latency,
        access: opts.consoleAccess,
      };
    }
    if (threads > 1) {
      // The protocols run on front-end threads; the main thread keeps the server (models, schedulers, statistics,
      // shared-memory regions, the response cache), so every thread sees the same state.
      frontEnds = await startFrontEnds(server, {
        threads,
        http: httpOn ? httpSettings : undefined,
        grpc: grpcSettings,
        console: consoleSources,
        logger: opts.logger,
      });
      if (frontEnds.grpcPort !== undefined) {
        opts.logger?.info(`Started GRPCInferenceService at ${grpcHost}:${frontEnds.grpcPort} (${threads} threads)`);
      }
      if (frontEnds.httpPort !== undefined) {
        opts.logger?.info(`Started HTTPService at ${httpHost}:${frontEnds.httpPort} (${threads} threads)`);
      }
    } else if (httpOn) {
      http = await startHttpServer(server, {
        ...httpSettings,
        reusePort: opts.reuseHttpPort,
        logger: opts.logger,
        routes: consoleSources ? consoleRoutes(consoleSources) : [],
        refuse: crossSiteRefusal,
      });
      opts.logger?.info(`Started HTTPService at ${httpHost}:${http.port}`);
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
        // Open HTTP connections keep being served until they close or the exit timeout (Triton); gRPC streams in
        // flight get the same time.
        const graceMs = (opts.exitTimeoutSecs ?? D.exitTimeoutSecs) * 1000;
        const drain = { drainMs: graceMs, idleMs: opts.httpDrainIdleMs };
        await Promise.all([http?.close(drain), grpc?.close(graceMs), frontEnds?.close(drain)]);
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
