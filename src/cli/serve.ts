import { defaultBackends } from '../backends/index.js';
import { createLogger, type Logger } from '../core/logger.js';
import { metricsSourceFrom, startMetricsServer, type RunningMetricsServer } from '../metrics/index.js';
import {
  startGrpcServer,
  type GrpcKeepaliveOptions,
  type GrpcTlsOptions,
  type RunningGrpcServer,
} from '../protocol/grpc/index.js';
import { startHttpServer } from '../protocol/http/server.js';
import { InferenceServer } from '../server/server.js';
import type { TraceOptions } from '../server/trace.js';

export interface ServeOptions {
  repositories: readonly string[];
  httpPort?: number;
  httpAddress?: string;
  httpMaxInputSize?: number;
  allowHttp?: boolean;
  backendConfig?: ReadonlyMap<string, Record<string, string>>;
  autoComplete?: boolean;
  strictReadiness?: boolean;
  exitOnError?: boolean;
  id?: string;
  modelControlMode?: 'none' | 'poll' | 'explicit';
  loadModels?: readonly string[];
  repositoryPollSecs?: number;
  trace?: TraceOptions;
  allowGrpc?: boolean;
  grpcPort?: number;
  grpcAddress?: string;
  grpcKeepalive?: GrpcKeepaliveOptions;
  grpcCompressionLevel?: 'none' | 'low' | 'medium' | 'high';
  grpcTls?: GrpcTlsOptions;
  /** Seconds in-flight work may take to finish at shutdown (`--exit-timeout-secs`). */
  exitTimeoutSecs?: number;
  allowMetrics?: boolean;
  metricsPort?: number;
  metricsAddress?: string;
  metricsIntervalMs?: number;
  metricsConfig?: readonly string[];
  allowCpuMetrics?: boolean;
  /** `--allow-gpu-metrics`: NVML's GPU families where a GPU is visible (default true). */
  allowGpuMetrics?: boolean;
  logger?: Logger;
}

/** A running Nereid: the server facade and its endpoints. `close()` is idempotent. */
export interface RunningNereid {
  server: InferenceServer;
  /** Base URL of the HTTP endpoint, e.g. `http://127.0.0.1:8000`. */
  httpUrl?: string;
  httpPort?: number;
  /** Port of the gRPC endpoint when gRPC is on. */
  grpcPort?: number;
  /** Port of the Prometheus endpoint when metrics are on. */
  metricsPort?: number;
  close(): Promise<void>;
}

/** Loads the repositories and starts the endpoints; what `nereid serve` runs and what tests start. */
export async function serve(opts: ServeOptions): Promise<RunningNereid> {
  const backends = defaultBackends();
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
    logger: opts.logger,
  });
  let http: Awaited<ReturnType<typeof startHttpServer>> | undefined;
  let metrics: RunningMetricsServer | undefined;
  let grpc: RunningGrpcServer | undefined;
  try {
    if (opts.allowGrpc ?? true) {
      const host = (opts.grpcAddress ?? '0.0.0.0').replace(/^ipv6:/, '');
      grpc = await startGrpcServer(server, {
        host,
        port: opts.grpcPort ?? 8001,
        keepalive: opts.grpcKeepalive,
        compressionLevel: opts.grpcCompressionLevel,
        tls: opts.grpcTls,
        logger: opts.logger,
      });
      opts.logger?.info(`Started GRPCInferenceService at ${host}:${grpc.port}`);
    }
    if (opts.allowMetrics ?? true) {
      const host = opts.metricsAddress ?? opts.httpAddress ?? '0.0.0.0';
      metrics = await startMetricsServer(metricsSourceFrom(server), {
        host,
        port: opts.metricsPort ?? 8002,
        intervalMs: opts.metricsIntervalMs,
        config: opts.metricsConfig ? [...opts.metricsConfig] : undefined,
        allowCpuMetrics: opts.allowCpuMetrics,
        allowGpuMetrics: opts.allowGpuMetrics,
        logger: opts.logger,
      });
      server.setObserver(metrics.observer);
      opts.logger?.info(`Started Metrics Service at ${host}:${metrics.port}`);
    }
    if (opts.allowHttp ?? true) {
      http = await startHttpServer(server, {
        host: opts.httpAddress ?? '0.0.0.0',
        port: opts.httpPort ?? 8000,
        maxInputSize: opts.httpMaxInputSize,
        logger: opts.logger,
      });
      opts.logger?.info(`Started HTTPService at ${opts.httpAddress ?? '0.0.0.0'}:${http.port}`);
    }
  } catch (err) {
    await grpc?.close(0);
    await metrics?.close();
    await server.close();
    await Promise.all(backends.map((b) => b.close?.()));
    throw err;
  }
  let closing: Promise<void> | undefined;
  const host = opts.httpAddress === undefined || opts.httpAddress === '0.0.0.0' ? '127.0.0.1' : opts.httpAddress;
  return {
    server,
    httpUrl: http ? `http://${host.includes(':') ? `[${host}]` : host}:${http.port}` : undefined,
    httpPort: http?.port,
    grpcPort: grpc?.port,
    metricsPort: metrics?.port,
    close() {
      closing ??= (async () => {
        // Readiness turns false and new requests are refused first; in-flight ones finish before the models go.
        server.beginShutdown();
        const graceMs = (opts.exitTimeoutSecs ?? 30) * 1000;
        await Promise.all([http?.close(), grpc?.close(graceMs)]);
        await metrics?.close();
        await server.close();
        await Promise.all(backends.map((b) => b.close?.()));
      })();
      return closing;
    },
  };
}
