import { defaultBackends, type Backend } from './backends/index.js';
import type { OnnxruntimeBackend } from './backends/onnxruntime/backend.js';
import type { PinnedPoolSource } from './metrics/pinned-metrics.js';
import { CustomMetrics } from './core/custom-metrics.js';
import { startFrontEnds, type RunningFrontEnds } from './frontend/pool.js';
import {
  consoleRoutes,
  type ConsoleSources,
  crossSiteRefusal,
  fanOutObserver,
  LatencyWindow,
} from './console/index.js';
import { metricsSourceFrom, startMetricsServer, type RunningMetricsServer } from './metrics/index.js';
import { startGrpcServer, type RunningGrpcServer } from './protocol/grpc/index.js';
import { startHttpServer } from './protocol/http/server.js';
import { InferenceServer } from './server/server.js';
import { resolveServeOptions, type ServeOptions } from './serve-options.js';
import { checkPortsFree } from './port-check.js';

export { resolveServeOptions, type ResolvedServeOptions, type ServeOptions } from './serve-options.js';

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
 * closed again before the error is thrown. Every setting is resolved first (serve-options.ts); this is wiring.
 */
// Long: wiring in start order, one step per endpoint, with the one rollback on a failed start.
export async function serve(opts: ServeOptions): Promise<RunningNereid> {
  const o = await resolveServeOptions(opts);
  await checkPortsFree(o);
  const { logger, threads } = o;
  // Metrics models define at run time (python pb_utils.MetricFamily): written by the backends, exported on /metrics.
  const customMetrics = new CustomMetrics();
  const backends = defaultBackends({
    customMetrics,
    modelRepositoryRestriction: o.modelRepositoryRestriction,
    pinnedMemoryPoolBytes: opts.pinnedMemoryPoolByteSize,
  });
  // Backends without a close() are skipped; the async wrapper gives Promise.all a promise for each.
  const closeBackends = (): Promise<unknown> => Promise.all(backends.map(async (b) => b.close?.()));
  const server = await InferenceServer.create({ ...o.server, backends });
  let http: Awaited<ReturnType<typeof startHttpServer>> | undefined;
  let metrics: RunningMetricsServer | undefined;
  let grpc: RunningGrpcServer | undefined;
  let frontEnds: RunningFrontEnds | undefined;
  try {
    if (threads <= 1 && o.grpc !== undefined) {
      grpc = await startGrpcServer(server, { ...o.grpc, reusePort: o.reuseGrpcPort, logger });
      logger.info(`Started GRPCInferenceService at ${o.grpc.host}:${grpc.port}`);
    }
    if (o.metrics !== undefined) {
      metrics = await startMetricsServer(
        { ...metricsSourceFrom(server), custom: customMetrics, pinnedPool: pinnedPoolOf(backends) },
        { ...o.metrics, logger },
      );
      server.setObserver(metrics.observer);
      logger.info(`Started Metrics Service at ${o.metrics.host}:${metrics.port}`);
    }
    // The console's sources stay on the main thread (the server's observer feeds its latencies, the CLI's logger its
    // log lines); front-end threads serve its routes and ask the main thread for them (src/frontend/host.ts).
    let consoleSources: ConsoleSources | undefined;
    if (o.console !== undefined) {
      // The console's latency percentiles need each request's time: it observes beside the metrics endpoint.
      const latency = new LatencyWindow();
      server.setObserver(fanOutObserver(metrics ? [metrics.observer, latency] : [latency]));
      consoleSources = {
        modelControlMode: o.modelControlMode,
        logs: o.console.logs,
        latency,
        access: o.console.access,
        repositories: opts.repositories,
      };
    }
    if (threads > 1) {
      // The protocols run on front-end threads; the main thread keeps the server (models, schedulers, statistics,
      // shared-memory regions, the response cache), so every thread sees the same state.
      frontEnds = await startFrontEnds(server, {
        threads,
        http: o.http,
        grpc: o.grpc,
        console: consoleSources,
        logger,
      });
      if (frontEnds.grpcPort !== undefined) {
        logger.info(`Started GRPCInferenceService at ${o.grpc?.host}:${frontEnds.grpcPort} (${threads} threads)`);
      }
      if (frontEnds.httpPort !== undefined) {
        logger.info(`Started HTTPService at ${o.http?.host}:${frontEnds.httpPort} (${threads} threads)`);
      }
    } else if (o.http !== undefined) {
      http = await startHttpServer(server, {
        ...o.http,
        reusePort: o.reuseHttpPort,
        logger,
        routes: consoleSources ? consoleRoutes(consoleSources) : [],
        refuse: crossSiteRefusal,
      });
      logger.info(`Started HTTPService at ${o.http.host}:${http.port}`);
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
    grpcAddress: grpcPort !== undefined ? o.grpc?.host : undefined,
    grpcPort,
    frontEnds,
    metricsAddress: metrics ? o.metrics?.host : undefined,
    metricsPort: metrics?.port,
    close() {
      closing ??= (async () => {
        // Readiness turns false and new requests are refused first; in-flight ones finish before the models go.
        server.beginShutdown();
        // Open HTTP connections keep being served until they close or the exit timeout (Triton); gRPC streams in
        // flight get the same time.
        await Promise.all([http?.close(o.drain), grpc?.close(o.drain.drainMs), frontEnds?.close(o.drain)]);
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

/** The onnxruntime backend's page-locked output pools, for the metrics. */
function pinnedPoolOf(backends: readonly Backend[]): PinnedPoolSource | undefined {
  const ort = backends.find((b): b is OnnxruntimeBackend => 'pinnedPoolStats' in b);
  return ort && (() => ort.pinnedPoolStats());
}
