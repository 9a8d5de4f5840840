import { InvalidArgError } from './core/errors.js';
import { createLogger, type Logger } from './core/logger.js';
import type { ConsoleAccess, LogRing } from './console/index.js';
import { cudaDeviceIds } from './native/cuda-device-ids.js';
import type { GrpcKeepaliveOptions, GrpcTlsOptions } from './protocol/grpc/index.js';
import { parseCorsOrigins, type CorsPolicy } from './protocol/http/cors.js';
import { DEFAULT_MAX_INPUT_SIZE } from './protocol/http/server.js';
import { compileForwardPattern } from './protocol/kserve/header-forward.js';
import { GRPC_RESTRICTED_HEADER_PREFIX, parseRestrictions, type Restrictions } from './protocol/restricted.js';
import { checkServerOptions, SERVER_DEFAULTS } from './server/defaults.js';
import type { InferenceServerOptions } from './server/server.js';

/**
 * What `serve()` starts. Every field is optional except `repositories`; defaults are Triton's (HTTP on 8000,
 * gRPC on 8001 and metrics on 8002, all on 0.0.0.0), the same as `nereid serve` with no flags. An embedder that
 * wants only HTTP on a free port passes `{ repositories, httpPort: 0, httpAddress: '127.0.0.1', allowGrpc: false,
 * allowMetrics: false }`.
 */
export interface ServeOptions extends Omit<InferenceServerOptions, 'backends'> {
  /** `--http-port`; 0 picks a free port (default 8000). */
  httpPort?: number;
  /**
   * `--pinned-memory-pool-byte-size`: page-locked output memory per GPU of onnxruntime's KIND_GPU instances
   * (default 256 MiB, Triton's; 0: none). backends/onnxruntime/capi/output-pool.ts.
   */
  pinnedMemoryPoolByteSize?: number;
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
  /** `--http-header-forward-pattern`: request headers matching it (case-insensitive) become request parameters. */
  httpHeaderForwardPattern?: string;
  /** `--http-restricted-api` entries, `<api>[,<api>...]:<header>=<value>` (repeatable). */
  httpRestrictedApi?: readonly string[];
  /**
   * `--http-cors-allow-origin` entries, `[<api>[,<api>...]=]<origin>` (repeatable; protocol/http/cors.ts): origins
   * whose pages may call the listed APIs. None by default: no CORS headers, and cross-site state changes are refused.
   */
  httpCorsAllowOrigin?: readonly string[];
  /** `--grpc-restricted-protocol` entries, `<api>[,<api>...]:<key>=<value>`; the header is `triton-grpc-protocol-<key>`. */
  grpcRestrictedProtocol?: readonly string[];
  /** `--allow-grpc` (default true). */
  allowGrpc?: boolean;
  /** `--grpc-header-forward-pattern`: call metadata matching it (case-insensitive) become request parameters. */
  grpcHeaderForwardPattern?: string;
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

/**
 * Every setting `serve()` uses, resolved once at start (fastify's pattern): defaults filled in (Triton's), checked,
 * restrictions parsed, the settings of each endpoint put together; frozen. A mistake fails start-up here, before
 * any repository is read or port bound. `serve()` itself is wiring.
 */
export interface ResolvedServeOptions {
  readonly logger: Logger;
  /** What the server facade is created with (its backends are serve()'s). */
  readonly server: Readonly<Omit<InferenceServerOptions, 'backends'>>;
  /** Front-end threads; 1: the main thread serves the protocols itself. */
  readonly threads: number;
  /** Settings of the HTTP endpoint; undefined with `--allow-http=false`. */
  readonly http: Readonly<HttpSettings> | undefined;
  /** Settings of the gRPC endpoint; undefined with `--allow-grpc=false`. */
  readonly grpc: Readonly<GrpcSettings> | undefined;
  /** Settings of the metrics endpoint; undefined with `--allow-metrics=false`. */
  readonly metrics: Readonly<MetricsSettings> | undefined;
  /** The web console on the HTTP port (needs HTTP). */
  readonly console: { readonly logs?: LogRing; readonly access?: ConsoleAccess } | undefined;
  readonly modelControlMode: 'none' | 'poll' | 'explicit';
  /** Set when a served protocol restricts the model-repository API: models' own loads are refused with it. */
  readonly modelRepositoryRestriction: string | undefined;
  readonly reuseHttpPort: boolean;
  readonly reuseGrpcPort: boolean;
  /** How long in-flight work may take at shutdown, and an idle keep-alive connection may wait for its next request. */
  readonly drain: { readonly drainMs: number; readonly idleMs: number | undefined };
}

export interface HttpSettings {
  host: string;
  port: number;
  maxInputSize: number | undefined;
  maxResponseBytes: number | undefined;
  maxConnections: number | undefined;
  headersTimeoutSecs: number | undefined;
  requestTimeoutSecs: number | undefined;
  restrictions: Restrictions;
  cors: CorsPolicy;
  streamMaxPendingBytes: number | undefined;
  streamStallTimeoutSecs: number | undefined;
  headerForwardPattern: string | undefined;
}

export interface GrpcSettings {
  host: string;
  port: number;
  keepalive: GrpcKeepaliveOptions | undefined;
  compressionLevel: ServeOptions['grpcCompressionLevel'];
  tls: GrpcTlsOptions | undefined;
  maxMessageSize: number;
  maxResponseBytes: number | undefined;
  maxResponsePoolSize: number | undefined;
  streamMaxPendingBytes: number | undefined;
  streamStallTimeoutSecs: number | undefined;
  restrictions: Restrictions;
  headerForwardPattern: string | undefined;
}

export interface MetricsSettings {
  host: string;
  port: number;
  intervalMs: number | undefined;
  config: string[] | undefined;
  allowCpuMetrics: boolean | undefined;
  allowGpuMetrics: boolean | undefined;
}

// Long: a table, one entry per setting, each resolved in place.
export async function resolveServeOptions(opts: ServeOptions): Promise<ResolvedServeOptions> {
  const D = SERVER_DEFAULTS;
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
  const loads = opts.modelLoadThreadCount;
  if (loads !== undefined && (!Number.isSafeInteger(loads) || loads < 1)) {
    throw new InvalidArgError(`--model-load-thread-count must be a positive integer, got ${loads}`);
  }
  const retries = opts.modelLoadRetryCount;
  if (retries !== undefined && (!Number.isSafeInteger(retries) || retries < 0)) {
    throw new InvalidArgError(`--model-load-retry-count must be an integer >= 0, got ${retries}`);
  }
  if (opts.modelConfigName !== undefined && !/^[^\s/\\]+$/.test(opts.modelConfigName)) {
    throw new InvalidArgError(
      `--model-config-name '${opts.modelConfigName}' must be a file name without spaces (configs/<name>.pbtxt)`,
    );
  }
  compileForwardPattern('http-header-forward-pattern', opts.httpHeaderForwardPattern);
  compileForwardPattern('grpc-header-forward-pattern', opts.grpcHeaderForwardPattern);
  const threads = opts.httpThreadCount ?? D.httpThreadCount;
  if (!Number.isSafeInteger(threads) || threads < 1) {
    throw new InvalidArgError(`--http-thread-count must be a positive integer, got ${threads}`);
  }
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
  // Without a logger from the caller: a silent one whose switches the logging extension can still turn on.
  const logger = opts.logger ?? createLogger({ switches: { info: false, warning: false, error: false } });
  const httpOn = opts.allowHttp ?? D.allowHttp;
  const http: HttpSettings | undefined = httpOn
    ? {
        host: opts.httpAddress ?? D.address,
        port: opts.httpPort ?? D.httpPort,
        maxInputSize: opts.httpMaxInputSize,
        maxResponseBytes: opts.maxResponseBytes,
        maxConnections: opts.httpMaxConnections,
        headersTimeoutSecs: opts.httpHeadersTimeoutSecs,
        requestTimeoutSecs: opts.httpRequestTimeoutSecs,
        restrictions: httpRestrictions,
        cors: parseCorsOrigins(opts.httpCorsAllowOrigin ?? []),
        streamMaxPendingBytes: opts.streamMaxPendingBytes,
        streamStallTimeoutSecs: opts.streamStallTimeoutSecs,
        headerForwardPattern: opts.httpHeaderForwardPattern,
      }
    : undefined;
  const grpc: GrpcSettings | undefined =
    (opts.allowGrpc ?? D.allowGrpc)
      ? {
          host: (opts.grpcAddress ?? D.address).replace(/^ipv6:/, ''),
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
          headerForwardPattern: opts.grpcHeaderForwardPattern,
        }
      : undefined;
  const metrics: MetricsSettings | undefined =
    (opts.allowMetrics ?? D.allowMetrics)
      ? {
          host: opts.metricsAddress ?? opts.httpAddress ?? D.address,
          port: opts.metricsPort ?? D.metricsPort,
          intervalMs: opts.metricsIntervalMs,
          config: opts.metricsConfig ? [...opts.metricsConfig] : undefined,
          allowCpuMetrics: opts.allowCpuMetrics,
          allowGpuMetrics: opts.allowGpuMetrics,
        }
      : undefined;
  return Object.freeze({
    logger,
    server: Object.freeze({
      repositories: opts.repositories,
      backendConfig: opts.backendConfig,
      autoComplete: opts.autoComplete,
      strictReadiness: opts.strictReadiness,
      exitOnError: opts.exitOnError,
      id: opts.id,
      modelControlMode: opts.modelControlMode,
      loadModels: opts.loadModels,
      repositoryPollSecs: opts.repositoryPollSecs,
      modelLoadThreadCount: loads,
      modelConfigName: opts.modelConfigName,
      modelLoadRetryCount: retries,
      trace: opts.trace,
      allowClientShm: opts.allowClientShm,
      cudaRuntime: opts.cudaRuntime,
      allowCodeInLoadRequests: opts.allowCodeInLoadRequests,
      gpus: opts.gpus ?? (await cudaDeviceIds()),
      responseCacheBytes: opts.responseCacheBytes,
      rateLimit: opts.rateLimit,
      logger,
    }),
    modelRepositoryRestriction: modelRepositoryRestriction(http?.restrictions, grpc?.restrictions),
    threads,
    http: http && Object.freeze(http),
    grpc: grpc && Object.freeze(grpc),
    metrics: metrics && Object.freeze(metrics),
    console: httpOn && (opts.console ?? true) ? { logs: opts.consoleLogs, access: opts.consoleAccess } : undefined,
    modelControlMode: opts.modelControlMode ?? D.modelControlMode,
    reuseHttpPort: opts.reuseHttpPort === true,
    reuseGrpcPort: opts.reuseGrpcPort === true,
    drain: Object.freeze({ drainMs: (opts.exitTimeoutSecs ?? D.exitTimeoutSecs) * 1000, idleMs: opts.httpDrainIdleMs }),
  });
}

/**
 * Why a Python model may not load or unload models (pb_utils.load_model): the model-repository API is restricted to
 * a header on a protocol the server serves, and a model has no header to present. Undefined when it is open.
 */
function modelRepositoryRestriction(http?: Restrictions, grpc?: Restrictions): string | undefined {
  const flags = [
    http?.has('model-repository') ? '--http-restricted-api' : undefined,
    grpc?.has('model-repository') ? '--grpc-restricted-protocol' : undefined,
  ].filter((f) => f !== undefined);
  if (flags.length === 0) return undefined;
  return `the model-repository API is restricted on this server (${flags.join(', ')}), and a model cannot present the header it demands`;
}
