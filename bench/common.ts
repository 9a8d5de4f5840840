import http from 'node:http';
/** Small helpers shared by the benchmark: progress output, ports, /proc readings, readiness polling. */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

/** Repository root (bench/ is one level down). */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Progress goes to stderr so stdout stays clean for the table. */
export function progress(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** A port that was free a moment ago (bound to 0, then closed); for servers whose port we must pass in. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** Polls `url` until it answers 200; resolves with the milliseconds since `since` (a performance.now()). */
export async function waitReady(url: string, since: number, timeoutMs: number, alive: () => boolean): Promise<number> {
  while (performance.now() - since < timeoutMs) {
    if (!alive()) throw new Error(`server exited before ${url} answered 200`);
    try {
      const res = await fetch(url);
      await res.arrayBuffer();
      if (res.status === 200) return performance.now() - since;
    } catch {
      /* not listening yet */
    }
    await sleep(2);
  }
  throw new Error(`${url} not ready within ${timeoutMs} ms`);
}

const TICKS_PER_S = 100; // USER_HZ on Linux

/** The pid and every descendant (MLServer and Triton start helper processes). */
function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {
      /* exited meanwhile */
    }
  }
  const out: number[] = [];
  const todo = [pid];
  while (todo.length > 0) {
    const p = todo.pop() as number;
    out.push(p);
    todo.push(...(children.get(p) ?? []));
  }
  return out;
}

/** CPU seconds (user + system, all threads) used so far by a process and its descendants. */
export function cpuSeconds(pid: number): number {
  let ticks = 0;
  for (const p of processTree(pid)) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]); // fields 14 and 15: utime, stime
    } catch {
      /* exited meanwhile */
    }
  }
  return ticks / TICKS_PER_S;
}

/** Resident memory in MiB of a process and its descendants. */
export function rssMiB(pid: number): number {
  let kb = 0;
  for (const p of processTree(pid)) {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      kb += m ? Number(m[1]) : 0;
    } catch {
      /* exited meanwhile */
    }
  }
  return kb / 1024;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export function median(values: readonly number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

/**
 * One binary-tensor infer request (`Inference-Header-Content-Length`) over a keep-alive agent; resolves on a 200
 * whose body was read, rejects otherwise. The load loop of the small benchmark scripts.
 */
export function postBinaryInfer(
  agent: http.Agent,
  port: number,
  model: string,
  body: Buffer,
  headerLength: number,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: `/v2/models/${model}/infer`,
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/octet-stream',
          'inference-header-content-length': headerLength,
          'content-length': body.length,
        },
      },
      (res) => {
        res.on('data', () => {});
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
