import { readFile } from 'node:fs/promises';

/**
 * Host CPU and memory from Linux's /proc, as Triton reads them for `nv_cpu_*`. Parsers are pure (tested on fixed
 * text); the readers return undefined where /proc does not exist (macOS, Windows), and the caller then omits the
 * gauges rather than report zeros a dashboard would believe.
 */

/** Jiffies since boot of the aggregate `cpu` line: time idle (idle + iowait) and time in every state. */
export interface CpuTimes {
  idle: number;
  total: number;
}

/** Host memory in bytes; used is total − available, which counts reclaimable page cache as free. */
export interface MemoryUsage {
  totalBytes: number;
  usedBytes: number;
}

/**
 * Parses the first `cpu ` line of /proc/stat: `cpu user nice system idle iowait irq softirq steal guest guest_nice`.
 * guest and guest_nice are already included in user and nice, so they are left out of the total.
 */
export function parseProcStat(text: string): CpuTimes | undefined {
  const line = text.split('\n').find((l) => l.startsWith('cpu '));
  if (!line) return undefined;
  const f = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (f.length < 4 || f.some((n) => !Number.isFinite(n))) return undefined;
  const [user, nice, system, idle, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
  return { idle: idle + iowait, total: user + nice + system + idle + iowait + irq + softirq + steal };
}

/** Busy fraction between two samples, in [0, 1]; 0 when no time passed (two reads within one jiffy). */
export function cpuUtilization(prev: CpuTimes, cur: CpuTimes): number {
  const total = cur.total - prev.total;
  const idle = cur.idle - prev.idle;
  if (!(total > 0)) return 0;
  return Math.min(1, Math.max(0, (total - idle) / total));
}

/** Parses MemTotal and MemAvailable (kB) of /proc/meminfo. */
export function parseMeminfo(text: string): MemoryUsage | undefined {
  const kb = (key: string): number | undefined => {
    const m = new RegExp(`^${key}:\\s+(\\d+)\\s*kB`, 'm').exec(text);
    return m ? Number(m[1]) * 1024 : undefined;
  };
  const total = kb('MemTotal');
  const available = kb('MemAvailable');
  if (total === undefined || available === undefined) return undefined;
  return { totalBytes: total, usedBytes: Math.max(0, total - available) };
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** Reads /proc/stat; undefined where it does not exist or does not parse. */
export async function readCpuTimes(path = '/proc/stat'): Promise<CpuTimes | undefined> {
  const text = await readOptional(path);
  return text === undefined ? undefined : parseProcStat(text);
}

/** Reads /proc/meminfo; undefined where it does not exist or does not parse. */
export async function readMemoryUsage(path = '/proc/meminfo'): Promise<MemoryUsage | undefined> {
  const text = await readOptional(path);
  return text === undefined ? undefined : parseMeminfo(text);
}
