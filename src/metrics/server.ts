import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { InvalidArgError } from '../core/errors.js';
import { noopLogger, type Logger } from '../core/logger.js';
import { parseMetricsConfig } from './config.js';
import { customMetricsSync } from './custom-metrics.js';
import { startGpuMetrics, type OpenNvml } from './gpu-metrics.js';
import { ModelLabels } from './labels.js';
import { registerLatencyMetrics } from './latency-metrics.js';
import { ScrapedCounter } from './families.js';
import { registerModelMetrics } from './model-metrics.js';
import type { InferenceObserver } from './observer.js';
import type { MetricsSource } from './source.js';
import { startSystemMetrics } from './system-metrics.js';
import { registerPinnedMetrics } from './pinned-metrics.js';

/** Triton's `--metrics-interval-ms` default. */
export const DEFAULT_METRICS_INTERVAL_MS = 2000;

export interface MetricsServerOptions {
  /** Listen address (`--metrics-address`; Triton's default is the HTTP address). Default 0.0.0.0. */
  host?: string;
  /** `--metrics-port`; 0 picks a free port. */
  port: number;
  /** `--metrics-interval-ms`: how often the host gauges are sampled. */
  intervalMs?: number;
  /** `--metrics-config` entries, `key=value`. */
  config?: readonly string[];
  /** `--allow-cpu-metrics` (default true). */
  allowCpuMetrics?: boolean;
  /** `--allow-gpu-metrics` (default true, as Triton's); the GPU families exist only where NVML sees a GPU. */
  allowGpuMetrics?: boolean;
  /** How NVML is opened (default: the driver's library); tests pass a double. */
  openNvml?: OpenNvml;
  logger?: Logger;
}

/** A listening metrics endpoint. */
export interface RunningMetricsServer {
  port: number;
  /** The registry behind `/metrics`, for tests and for families added later (GPU, cache). */
  registry: Registry;
  /** Feeds the latency summaries/histogram; the server facade calls it once per successful request. */
  observer: InferenceObserver;
  /** Stops sampling and listening, closing idle keep-alive scrapers; idempotent. */
  close(): Promise<void>;
}

/**
 * Starts Triton's metrics endpoint: `GET /metrics` in Prometheus text format on its own port, every other request
 * 404. Options are checked before anything listens, so a bad `--metrics-config` fails start-up with InvalidArgError.
 */
export async function startMetricsServer(
  source: MetricsSource,
  opts: MetricsServerOptions,
): Promise<RunningMetricsServer> {
  const logger = opts.logger ?? noopLogger;
  const config = parseMetricsConfig(opts.config);
  const intervalMs = opts.intervalMs ?? DEFAULT_METRICS_INTERVAL_MS;
  if (!Number.isSafeInteger(intervalMs) || intervalMs <= 0) {
    throw new InvalidArgError(`--metrics-interval-ms must be a positive integer, got ${intervalMs}`);
  }
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) {
    throw new InvalidArgError(`--metrics-port must be an integer in [0, 65535], got ${opts.port}`);
  }

  const registry = new Registry();
  const labels = new ModelLabels(logger);
  registerModelMetrics(registry, source, config, labels);
  const observer = registerLatencyMetrics(registry, source, config, labels);
  if (source.pinnedPool !== undefined) registerPinnedMetrics(registry, source.pinnedPool);
  registerTraceDrops(registry, source);
  const system = (opts.allowCpuMetrics ?? true) ? await startSystemMetrics(registry, intervalMs, logger) : undefined;
  const gpu =
    (opts.allowGpuMetrics ?? true) ? await startGpuMetrics(registry, intervalMs, logger, opts.openNvml) : undefined;

  const syncCustom = customMetricsSync(registry, logger);
  let closing: Promise<void> | undefined;
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    // A scrape answered while closing leaves its connection idle: close it so close() need not wait for it.
    res.once('close', () => {
      if (closing !== undefined) server.closeIdleConnections();
    });
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not Found\n');
      return;
    }
    if (source.custom !== undefined) syncCustom(source.custom);
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType }).end(text);
      },
      (err: unknown) => {
        logger.error({ err }, 'metrics scrape failed');
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics scrape failed\n');
      },
    );
  };
  const server = createServer(onRequest);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port, opts.host ?? '0.0.0.0', () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    system?.stop();
    await gpu?.stop();
    throw err;
  }
  server.on('error', (err) => logger.error({ err }, 'metrics server error'));

  return {
    port: (server.address() as AddressInfo).port,
    registry,
    observer,
    close() {
      closing ??= new Promise<void>((resolve) => {
        system?.stop();
        // Prometheus keeps its scrape connection open; without this, close() would wait for its idle timeout.
        server.close(() => resolve());
        server.closeIdleConnections();
      }).then(() => gpu?.stop());
      return closing;
    },
  };
}

/** Nereid's own (Triton counts none): OpenTelemetry spans lost to a full queue or a collector that failed. */
function registerTraceDrops(registry: Registry, source: MetricsSource): void {
  const dropped = source.droppedTraceSpans;
  if (dropped === undefined) return;
  registry.registerMetric(
    new ScrapedCounter('nereid_trace_spans_dropped', 'OpenTelemetry trace spans dropped before export', () => [
      { labels: {}, value: dropped() },
    ]),
  );
}
