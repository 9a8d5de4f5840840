/** One server under test, whatever it is (Nereid, a peer): its process, endpoints and readings. */
import type { ChildProcess } from 'node:child_process';
import { rssMiB, sleep, waitReady } from '../common.js';
import type { LagMessage, LagReading } from '../lag.js';

/** Cumulative KServe statistics of one model (Triton's statistics extension; Nereid and Triton have it). */
export interface ModelStats {
  count: number;
  successNs: number;
  computeInferNs: number;
}

export interface BenchServer {
  /** 'nereid', 'fastify', 'triton', 'mlserver'. */
  label: string;
  pid: number;
  /** host:port of the KServe v2 HTTP endpoint. */
  http: string;
  /** host:port of the KServe v2 gRPC endpoint, when served. */
  grpc?: string;
  /** Spawn to first 200 from /v2/health/ready, ms. */
  readyMs: number;
  /** Statistics of a model, when the server has the statistics extension. */
  stats(model: string): Promise<ModelStats | undefined>;
  /** Event-loop delay since the last call, when the server reports it. */
  lag?(): Promise<LagReading>;
  close(): Promise<void>;
}

/** Waits for the server's readiness; on failure the error carries the tail of what the process printed. */
export async function awaitReady(child: ChildProcess, url: string, since: number, timeoutMs: number): Promise<number> {
  let output = '';
  const keep = (b: Buffer): void => void (output = (output + b.toString()).slice(-2000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  try {
    return await waitReady(`${url}/v2/health/ready`, since, timeoutMs, () => child.exitCode === null);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n${output.trim()}`);
  }
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
export async function stopProcess(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Reads /v2/models/<m>/stats (sums over versions). */
export async function kserveStats(http: string, model: string): Promise<ModelStats | undefined> {
  try {
    const res = await fetch(`http://${http}/v2/models/${model}/stats`);
    if (res.status !== 200) return undefined;
    const body = (await res.json()) as {
      model_stats: { inference_stats: Record<string, { count: number; ns: number }> }[];
    };
    const s: ModelStats = { count: 0, successNs: 0, computeInferNs: 0 };
    for (const m of body.model_stats) {
      s.count += m.inference_stats.success.count;
      s.successNs += m.inference_stats.success.ns;
      s.computeInferNs += m.inference_stats.compute_infer.ns;
    }
    return s;
  } catch {
    return undefined;
  }
}

/** Asks a forked child that runs lag.ts for its event-loop delay (and resets it). */
export function ipcLag(child: ChildProcess): () => Promise<LagReading> {
  return () =>
    new Promise((resolve, reject) => {
      const onMessage = (m: LagMessage): void => {
        if ('lag' in m) {
          child.off('message', onMessage);
          resolve(m.lag);
        }
      };
      child.on('message', onMessage);
      if (!child.send('lag')) reject(new Error('IPC channel closed'));
    });
}

/** RSS after the server has sat idle for `settleMs`. */
export async function idleRss(pid: number, settleMs: number): Promise<number> {
  await sleep(settleMs);
  return rssMiB(pid);
}
