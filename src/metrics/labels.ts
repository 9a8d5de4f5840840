import type { Logger } from '../core/logger.js';
import type { Labels } from './families.js';
import type { ModelSeries } from './source.js';

/** A `metric_tags` key that makes a valid, non-reserved Prometheus label once prefixed with `_`. */
const SIMPLE_TAG = /^[a-zA-Z0-9][a-zA-Z0-9_]*$/;

/** Stable key of a served version, for per-series state. */
export function seriesKey(name: string, version: number): string {
  return `${name}\u0000${version}`;
}

/**
 * Builds Triton's per-model labels: `model`, `version`, and `_<key>` for each metric_tags entry. A key that cannot
 * be a label name (`a-b`, `_x`, which would give the reserved `__` prefix) is skipped with one warning per model and
 * key, rather than failing the scrape of every other model.
 */
export class ModelLabels {
  readonly #logger: Logger;
  readonly #warned = new Set<string>();

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  of(s: ModelSeries): Labels {
    const labels: Record<string, string> = { model: s.name, version: String(s.version) };
    for (const [key, value] of Object.entries(s.metricTags ?? {})) {
      if (SIMPLE_TAG.test(key)) {
        labels[`_${key}`] = String(value);
      } else if (!this.#warned.has(`${s.name}\u0000${key}`)) {
        this.#warned.add(`${s.name}\u0000${key}`);
        this.#logger.warn(
          { model: s.name },
          `metric_tags key '${key}' is not a valid Prometheus label name once prefixed with '_'; left out of metrics`,
        );
      }
    }
    return labels;
  }
}
