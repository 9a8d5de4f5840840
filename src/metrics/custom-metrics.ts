import type { Registry } from 'prom-client';
import type { CustomFamily } from '../core/custom-metrics.js';
import type { Logger } from '../core/logger.js';

/**
 * Exports the families models define at run time (core/custom-metrics.ts) on `/metrics`, under the names and labels
 * the model gave them, as Triton exports TRITONSERVER_MetricFamily values (no model/version labels added).
 *
 * Families come and go as models load and unload, so the registry is brought in line with the store before every
 * scrape: a family the store no longer has is removed; one whose name a built-in family already has is left out
 * with one warning (a custom family cannot replace nv_inference_count).
 */
export interface CustomFamiliesSource {
  families(): Iterable<CustomFamily>;
}

interface Exported {
  name: string;
  help: string;
  type: string;
  values: { value: number; labels: Record<string, string | number>; metricName?: string }[];
  aggregator: 'sum';
}

/** A prom-client registry entry for one custom family (the registry only needs `name` and `get()`). */
interface Entry {
  name: string;
  family: CustomFamily;
  get(): Promise<Exported>;
}

export function customMetricsSync(registry: Registry, logger: Logger): (source: CustomFamiliesSource) => void {
  const entries = new Map<string, Entry>();
  const warned = new Set<string>();
  return (source) => {
    const live = new Map<string, CustomFamily>();
    for (const f of source.families()) live.set(f.name, f);
    for (const [name, e] of entries) {
      if (live.get(name) !== e.family) {
        registry.removeSingleMetric(name);
        entries.delete(name);
      }
    }
    for (const [name, family] of live) {
      if (entries.has(name)) continue;
      if (registry.getSingleMetric(name) !== undefined) {
        if (!warned.has(name)) {
          warned.add(name);
          logger.warn(`custom metric family '${name}' has the name of a built-in metric; left out of /metrics`);
        }
        continue;
      }
      const entry: Entry = { name, family, get: async () => exportFamily(family) };
      registry.registerMetric(entry as never);
      entries.set(name, entry);
    }
  };
}

function exportFamily(f: CustomFamily): Exported {
  const values: Exported['values'] = [];
  for (const s of f.series.values()) {
    if (f.kind !== 'histogram') {
      values.push({ value: s.value, labels: { ...s.labels } });
      continue;
    }
    let cumulative = 0;
    (s.buckets ?? []).forEach((b, i) => {
      cumulative += s.counts?.[i] ?? 0;
      values.push({ metricName: `${f.name}_bucket`, value: cumulative, labels: { ...s.labels, le: String(b) } });
    });
    values.push({ metricName: `${f.name}_bucket`, value: s.count, labels: { ...s.labels, le: '+Inf' } });
    values.push({ metricName: `${f.name}_sum`, value: s.sum, labels: { ...s.labels } });
    values.push({ metricName: `${f.name}_count`, value: s.count, labels: { ...s.labels } });
  }
  return { name: f.name, help: f.help, type: f.kind, values, aggregator: 'sum' };
}
