import { InvalidArgError } from '../core/errors.js';
import { boolWord } from '../core/bool-word.js';

/** One target quantile of a summary and its allowed rank error (Triton's `summary_quantiles` pairs). */
export interface QuantileTarget {
  quantile: number;
  error: number;
}

/** What `--metrics-config k=v` selects; parsed once, frozen. */
export interface MetricsConfig {
  /** Cumulative `*_duration_us` counters (Triton's default on). */
  readonly counterLatencies: boolean;
  /** `*_summary_us` summaries (default off). */
  readonly summaryLatencies: boolean;
  /** `nv_inference_first_response_histogram_ms` (default off). */
  readonly histogramLatencies: boolean;
  readonly summaryQuantiles: readonly QuantileTarget[];
}

/** Triton's defaults (`src/command_line_parser.cc`). */
export const DEFAULT_METRICS_CONFIG: MetricsConfig = Object.freeze({
  counterLatencies: true,
  summaryLatencies: false,
  histogramLatencies: false,
  summaryQuantiles: Object.freeze([
    { quantile: 0.5, error: 0.05 },
    { quantile: 0.9, error: 0.01 },
    { quantile: 0.95, error: 0.001 },
    { quantile: 0.99, error: 0.001 },
  ]),
});

const KEYS = ['counter_latencies', 'histogram_latencies', 'summary_latencies', 'summary_quantiles'] as const;

/**
 * Parses `--metrics-config` entries (`key=value`, later entries win, as Triton's map does). An unknown key, a bad
 * boolean or a bad quantile list is an InvalidArgError naming the entry, so a typo fails start-up instead of
 * silently leaving a dashboard empty.
 */
export function parseMetricsConfig(entries: readonly string[] = []): MetricsConfig {
  const out = { ...DEFAULT_METRICS_CONFIG };
  for (const entry of entries) {
    const eq = entry.indexOf('=');
    if (eq <= 0) throw new InvalidArgError(`--metrics-config expects <key>=<value>, got '${entry}'`);
    const key = entry.slice(0, eq);
    const value = entry.slice(eq + 1);
    switch (key) {
      case 'counter_latencies':
        out.counterLatencies = parseBool(key, value);
        break;
      case 'histogram_latencies':
        out.histogramLatencies = parseBool(key, value);
        break;
      case 'summary_latencies':
        out.summaryLatencies = parseBool(key, value);
        break;
      case 'summary_quantiles':
        out.summaryQuantiles = Object.freeze(parseQuantiles(value));
        break;
      default:
        throw new InvalidArgError(`--metrics-config: unknown key '${key}' (known: ${KEYS.join(', ')})`);
    }
  }
  return Object.freeze(out);
}

function parseBool(key: string, value: string): boolean {
  const b = boolWord(value);
  if (b === undefined) throw new InvalidArgError(`--metrics-config ${key} must be true or false, got '${value}'`);
  return b;
}

/** `0.5:0.05,0.9:0.01`: quantile:error pairs, each in [0, 1]. */
function parseQuantiles(value: string): QuantileTarget[] {
  const targets = value.split(',').map((pair) => {
    const parts = pair.split(':');
    const [q, e] = parts.map((p) => (p.trim() === '' ? NaN : Number(p)));
    if (parts.length !== 2 || !(q >= 0 && q <= 1) || !(e >= 0 && e <= 1)) {
      throw new InvalidArgError(
        `--metrics-config summary_quantiles expects <quantile>:<error> pairs in [0, 1], got '${pair}' in '${value}'`,
      );
    }
    return { quantile: q, error: e };
  });
  return targets;
}
