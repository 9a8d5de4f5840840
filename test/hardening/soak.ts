/**
 * A bounded soak: `nereid serve` as a real process with a Python model (fanout) and 2 front-end threads, driven
 * with mixed traffic (soak-traffic.ts) for N rounds; the resident memory of the server and of its process tree
 * (the Python stub) is sampled after each round, and a line fitted over the second half of the rounds (after
 * warm-up: JIT, pools, the cache filling) says whether memory still trends up. Run it by hand:
 *   node --conditions=nereid-source --import tsx test/hardening/soak.ts [--seconds=180] [--rounds=1000] [--scale=3] [--max-slope=0.5]
 * (max-slope in MiB per round, for the server and for the tree); it exits 1 on a trend or on a wrong answer.
 * soak.test.ts runs a short version in npm test.
 */
import { readFileSync } from 'node:fs';
import { rm, unlink, writeFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { EXAMPLES } from '../helpers/server.js';
import { writeFuzzRepo } from './fuzz-repo.js';
import { startServerProcess, type ServerProcess } from './server-process.js';
import { soakContext, soakRound } from './soak-traffic.js';

/** Resident memory of a process and all its descendants, in MiB (shared pages counted in each). */
export function treeRssMiB(pid: number): number {
  const rss = (p: number): number => {
    try {
      const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      return m ? Number(m[1]) / 1024 : 0;
    } catch {
      return 0; // exited between the listing and the read
    }
  };
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number);
  } catch {
    children = [];
  }
  return rss(pid) + children.reduce((sum, c) => sum + treeRssMiB(c), 0);
}

/**
 * The live JS heap after each isolate's latest full GC (the server runs with --trace-gc), summed over isolates
 * (main thread, front-end and engine threads), in MiB: unlike RSS, it does not grow because V8 chose to grow a
 * heap before collecting it. NaN before the first full GC.
 */
export function liveHeapMiB(logs: string): number {
  const latest = new Map<string, number>();
  for (const m of logs.matchAll(
    /\[\d+:(0x[0-9a-f]+)\]\s+\d+ ms: Mark-Compact(?: \(reduce\))? [\d.]+ \([\d.]+\) -> ([\d.]+)/g,
  ))
    latest.set(m[1], Number(m[2]));
  return latest.size === 0 ? NaN : [...latest.values()].reduce((a, b) => a + b, 0);
}

/** Least-squares slope of ys over their indices. */
export function slope(ys: number[]): number {
  const n = ys.length;
  if (n < 2) return 0;
  const mx = (n - 1) / 2;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  ys.forEach((y, x) => {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  });
  return num / den;
}

export interface SoakRound {
  round: number;
  seconds: number;
  serverMiB: number;
  treeMiB: number;
  heapMiB: number;
  problems: string[];
}

export interface SoakResult {
  rounds: SoakRound[];
  /** MiB per round over the second half. */
  serverSlope: number;
  treeSlope: number;
  heapSlope: number;
}

export async function runSoak(opts: {
  rounds: number;
  scale: number;
  /** Stop after this long, even with rounds left (the by-hand run is bounded in time; rounds vary with load). */
  seconds?: number;
  /** More V8 flags for the server (the test makes every GC a full one: the live heap is then read every round). */
  nodeArgs?: string[];
  onRound?: (r: SoakRound) => void;
}): Promise<SoakResult> {
  const repo = await writeFuzzRepo();
  const shmFile = `/dev/shm/nereid-soak-${process.pid}`;
  await writeFile(
    shmFile,
    Buffer.concat([
      Buffer.from(Int32Array.from({ length: 16 }, (_, i) => i).buffer),
      Buffer.from(new Int32Array(16).fill(1).buffer),
    ]),
  );
  let server: ServerProcess | undefined;
  try {
    server = await startServerProcess(
      [
        `--model-repository=${repo}`,
        `--model-repository=${EXAMPLES}`,
        '--model-control-mode=explicit',
        ...['simple', 'fanout', 'acc', 'cached'].map((m) => `--load-model=${m}`),
        '--allow-client-shm=true',
        '--cache-config=local,size=65536',
        '--exit-timeout-secs=2',
        // After the suites' default: the last value wins.
        '--http-thread-count=2',
      ],
      ['--trace-gc', ...(opts.nodeArgs ?? [])],
    );
    const ctx = soakContext(server, shmFile.slice('/dev/shm'.length));
    const rounds: SoakRound[] = [];
    const pid = server.child.pid as number;
    const started = performance.now();
    for (let round = 0; round < opts.rounds; round++) {
      const t0 = performance.now();
      const problems = await soakRound(ctx, round, opts.scale);
      if (server.exited() !== undefined) problems.push(`the server exited: ${server.logs().slice(-2000)}`);
      const r: SoakRound = {
        round,
        seconds: (performance.now() - t0) / 1000,
        serverMiB: server.memory().rssMiB,
        treeMiB: Math.round(treeRssMiB(pid)),
        heapMiB: Math.round(liveHeapMiB(server.logs()) * 10) / 10,
        problems,
      };
      rounds.push(r);
      opts.onRound?.(r);
      if (server.exited() !== undefined) break;
      if (opts.seconds !== undefined && performance.now() - started > opts.seconds * 1000) break;
    }
    ctx.client.close();
    const half = rounds.slice(Math.floor(rounds.length / 2));
    return {
      rounds,
      serverSlope: slope(half.map((r) => r.serverMiB)),
      treeSlope: slope(half.map((r) => r.treeMiB)),
      heapSlope: slope(half.map((r) => r.heapMiB).filter(Number.isFinite)),
    };
  } finally {
    await server?.stop();
    await unlink(shmFile).catch(() => undefined);
    await rm(repo, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const arg = (name: string, fallback: number): number => {
    const a = process.argv.find((x) => x.startsWith(`--${name}=`));
    return a === undefined ? fallback : Number(a.slice(name.length + 3));
  };
  const maxSlope = arg('max-slope', 0.5);
  const t0 = performance.now();
  const result = await runSoak({
    rounds: arg('rounds', 1000),
    seconds: arg('seconds', 180),
    scale: arg('scale', 3),
    onRound: (r) =>
      console.log(
        `round ${String(r.round).padStart(3)}  ${r.seconds.toFixed(1).padStart(5)} s  server ${r.serverMiB} MiB  tree ${r.treeMiB} MiB  live heap ${r.heapMiB} MiB` +
          (r.problems.length > 0 ? `  PROBLEMS ${r.problems.length}: ${r.problems.slice(0, 3).join(' | ')}` : ''),
      ),
  });
  const problems = result.rounds.reduce((n, r) => n + r.problems.length, 0);
  console.log(
    `${result.rounds.length} rounds in ${((performance.now() - t0) / 1000).toFixed(0)} s; slope over the second half: ` +
      `server ${result.serverSlope.toFixed(3)} MiB/round, tree ${result.treeSlope.toFixed(3)} MiB/round, live heap ${result.heapSlope.toFixed(3)} MiB/round ` +
      `(limit ${maxSlope}); ${problems} problems`,
  );
  const trend = result.serverSlope > maxSlope || result.treeSlope > maxSlope;
  if (trend || problems > 0) process.exitCode = 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
