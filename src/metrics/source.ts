import type { CustomFamiliesSource } from './custom-metrics.js';
import type { PinnedPoolSource } from './pinned-metrics.js';
import type { ModelStats } from '../core/stats.js';
import type { Model } from '../repository/model.js';

/** One served model version as the metrics see it. */
export interface ModelSeries {
  readonly name: string;
  readonly version: number;
  /** Cumulative totals; read at every scrape, never written by the metrics code. */
  readonly stats: ModelStats;
  /** Requests queued, not yet executing. */
  readonly pending: number;
  /** How long loading this version took, when the repository measured it. */
  readonly loadSeconds?: number;
  /** The config's `metric_tags`, exported as `_<key>` labels. */
  readonly metricTags?: Readonly<Record<string, string>>;
  /** Instances able to run now, and how many the version has. */
  readonly healthyInstances: number;
  readonly instances: number;
}

/**
 * What the metrics read, so `src/metrics` does not depend on the server facade: the versions being served now,
 * asked afresh at every scrape (models may load and unload between scrapes).
 */
export interface MetricsSource {
  models(): Iterable<ModelSeries>;
  /** Families models define at run time (python `pb_utils.MetricFamily`), exported as they are. */
  custom?: CustomFamiliesSource;
  /** The page-locked output pools' totals (`nv_pinned_memory_pool_*`); absent: those metrics are not exported. */
  pinnedPool?: PinnedPoolSource;
  /** OpenTelemetry spans dropped so far (server/trace-otel.ts). */
  droppedTraceSpans?(): number;
}

/**
 * Adapts anything that lists repository models (the InferenceServer facade) to a MetricsSource: every loaded
 * version (READY, or UNAVAILABLE because no instance is healthy), with its scheduler's pending count. `loadSeconds` is picked up once ModelVersion carries it.
 */
export function metricsSourceFrom(server: { models(): readonly Model[]; droppedTraceSpans?(): number }): MetricsSource {
  return {
    droppedTraceSpans: server.droppedTraceSpans && (() => server.droppedTraceSpans?.() ?? 0),
    *models() {
      for (const model of server.models()) {
        for (const v of model.versions.values()) {
          // Served versions, healthy or not: a version whose instances all died is UNAVAILABLE but still loaded,
          // and its failures and instance gauges are what an operator looks at.
          if (v.pool === undefined || (v.state !== 'READY' && v.state !== 'UNAVAILABLE')) continue;
          const health = v.pool.health();
          const loadSeconds = 'loadSeconds' in v && typeof v.loadSeconds === 'number' ? v.loadSeconds : undefined;
          yield {
            name: model.name,
            version: v.version,
            stats: v.stats,
            pending: v.scheduler?.pending ?? 0,
            loadSeconds,
            metricTags: model.spec?.config.metric_tags,
            healthyInstances: health.healthy,
            instances: health.total,
          };
        }
      }
    },
  };
}
