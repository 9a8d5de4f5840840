/**
 * The closed loop of one measurement point, run on a load-generator thread of its own (loadgen-thread.ts): a
 * closed loop of `concurrency` HTTP clients (keep-alive, binary tensor data) sending the prepared requests
 * round-robin, a warm-up, then fixed windows until the 95% confidence interval of the windows' throughput is within
 * `ciTarget` of the mean, or the time cap.
 */
import http from 'node:http';
import { cpus } from 'node:os';

/** A prepared request: body and headers, encoded once. */
export interface Prepared {
  path: string;
  method: 'POST' | 'GET';
  body?: Uint8Array;
  headers: Record<string, string | number>;
}

/** What the loop needs: plain data, so that it crosses to the load-generator thread. */
export interface LoopOptions {
  /** Base URL of the server, `http://host:port`. */
  url: string;
  concurrency: number;
  warmupMs: number;
  /** Time cap of the measured part. */
  maxMs: number;
  /** Relative half-width of the 95% confidence interval that counts as stable (0.05: ±5%). */
  ciTarget?: number;
}

export interface LoopResult {
  concurrency: number;
  /** Successful inferences per second over the measured windows. */
  throughput: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  errors: number;
  /** The first error's status and message, when there were errors. */
  firstError?: string;
  /** Relative half-width of the throughput's 95% confidence interval. */
  ci: number;
  stable: boolean;
  /** Machine-wide CPU use over the point, 0–100. */
  cpuPct: number;
  measuredMs: number;
}

function cpuTimes(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const c of cpus()) {
    const t = c.times.user + c.times.nice + c.times.sys + c.times.irq;
    busy += t;
    total += t + c.times.idle;
  }
  return { busy, total };
}

function send(agent: http.Agent, base: URL, r: Prepared): Promise<number | string> {
  return new Promise((resolve) => {
    const req = http.request(
      { host: base.hostname, port: base.port, path: r.path, method: r.method, agent, headers: r.headers },
      (res) => {
        const chunks: Buffer[] = [];
        const ok = res.statusCode === 200;
        res.on('data', (c: Buffer) => {
          if (!ok) chunks.push(c);
        });
        res.on('end', () => resolve(ok ? 200 : `HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString('utf8')}`));
      },
    );
    req.on('error', (err) => resolve(err.message));
    req.end(r.body);
  });
}

const percentile = (sorted: readonly number[], p: number): number =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

/** Mean and relative 95% half-width of per-window counts. */
function confidence(windows: readonly number[]): { mean: number; ci: number } {
  const n = windows.length;
  const mean = windows.reduce((a, b) => a + b, 0) / Math.max(1, n);
  if (n < 2 || mean === 0) return { mean, ci: Infinity };
  const sd = Math.sqrt(windows.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1));
  return { mean, ci: (1.96 * sd) / Math.sqrt(n) / mean };
}

/**
 * Runs one point against `prepared` (round-robin). `hooks.measuring` is called when the warm-up ends (GPU sampling
 * starts there); `hooks.stopped` is polled with the windows (an abort from the caller).
 */
// Long: the closed loop, its window clock and the stop rule read best together.
export async function runLoop(
  prepared: readonly Prepared[],
  o: LoopOptions,
  hooks: { measuring(): void; stopped(): boolean },
): Promise<LoopResult> {
  const base = new URL(o.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.concurrency });
  const windowMs = Math.max(25, Math.min(250, o.maxMs / 12));
  const ciTarget = o.ciTarget ?? 0.05;
  const latencies: number[] = [];
  const windows: number[] = [];
  let current = 0;
  let errors = 0;
  let firstError: string | undefined;
  let measuring = false;
  let stop = false;
  let cpu0 = cpuTimes();
  let measuredFrom = 0;
  const clock = setTimeout(function startMeasuring() {
    measuring = true;
    measuredFrom = performance.now();
    cpu0 = cpuTimes();
    hooks.measuring();
    const tick = setInterval(() => {
      windows.push(current);
      current = 0;
      const elapsed = performance.now() - measuredFrom;
      const { ci } = confidence(windows);
      if ((windows.length >= 5 && ci <= ciTarget) || elapsed >= o.maxMs || hooks.stopped()) {
        stop = true;
        clearInterval(tick);
      }
    }, windowMs);
  }, o.warmupMs);
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: o.concurrency }, async () => {
        while (!stop) {
          const r = prepared[next++ % prepared.length];
          const t = performance.now();
          const status = await send(agent, base, r);
          if (!measuring || stop) continue;
          if (status === 200) {
            latencies.push(performance.now() - t);
            current++;
          } else {
            errors++;
            firstError ??= String(status);
          }
        }
      }),
    );
  } finally {
    clearTimeout(clock);
    agent.destroy();
  }
  const measuredMs = windows.length * windowMs;
  const cpu1 = cpuTimes();
  latencies.sort((a, b) => a - b);
  const { mean, ci } = confidence(windows);
  return {
    concurrency: o.concurrency,
    throughput: (mean * 1000) / windowMs,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    requests: latencies.length,
    errors,
    firstError,
    ci,
    stable: ci <= ciTarget,
    cpuPct: cpu1.total > cpu0.total ? (100 * (cpu1.busy - cpu0.busy)) / (cpu1.total - cpu0.total) : 0,
    measuredMs,
  };
}
