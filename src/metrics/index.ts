/** Prometheus metrics with Triton's names, on their own port. */
export { DEFAULT_METRICS_CONFIG, parseMetricsConfig, type MetricsConfig, type QuantileTarget } from './config.js';
export { FIRST_RESPONSE_BUCKETS_MS } from './latency-metrics.js';
export { noopObserver, type InferenceObserver, type RequestTimings } from './observer.js';
export { cpuUtilization, parseMeminfo, parseProcStat, type CpuTimes, type MemoryUsage } from './proc.js';
export {
  DEFAULT_METRICS_INTERVAL_MS,
  startMetricsServer,
  type MetricsServerOptions,
  type RunningMetricsServer,
} from './server.js';
export { metricsSourceFrom, type MetricsSource, type ModelSeries } from './source.js';
