/** Small helpers of the GPU benchmarks' reports (bench/gpu.ts, bench/tensorrt.ts). */
import { execFileSync } from 'node:child_process';

/** A number for a table cell: '–' when unknown. */
export function fmt(n: number | undefined, digits = 0): string {
  return n === undefined || Number.isNaN(n) ? '–' : n.toFixed(digits);
}

/** The row with the most sequences per second. */
export function best<R extends { seq_s: number }>(rs: readonly R[]): R | undefined {
  return rs.reduce<R | undefined>((a, r) => (a === undefined || r.seq_s > a.seq_s ? r : a), undefined);
}

/** The GPU the numbers were measured on, as nvidia-smi names it. */
export function nvidiaSmi(fields = 'name,driver_version,memory.total'): string {
  try {
    return execFileSync('nvidia-smi', [`--query-gpu=${fields}`, '--format=csv,noheader'], { encoding: 'utf8' }).trim();
  } catch {
    return 'nvidia-smi unavailable';
  }
}
