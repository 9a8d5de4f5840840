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
}

/**
 * What the metrics read, so `src/metrics` does not depend on the server facade: the versions being served now,
 * asked afresh at every scrape (models may load and unload between scrapes).
 */
export interface MetricsSource {
  models(): Iterable<ModelSeries>;
}

/**
 * Adapts anything that lists repository models (the InferenceServer facade) to a MetricsSource: every READY
 * version, with its scheduler's pending count. `loadSeconds` is picked up once ModelVersion carries it.
 */
export function metricsSourceFrom(server: { models(): readonly Model[] }): MetricsSource {
  return {
    *models() {
      for (const model of server.models()) {
        for (const v of model.versions.values()) {
          if (v.state !== 'READY') continue;
          const loadSeconds = 'loadSeconds' in v && typeof v.loadSeconds === 'number' ? v.loadSeconds : undefined;
          yield {
            name: model.name,
            version: v.version,
            stats: v.stats,
            pending: v.scheduler?.pending ?? 0,
            loadSeconds,
            metricTags: model.spec?.config.metric_tags,
          };
        }
      }
    },
  };
}
