/** Nereid under test: the built CLI (dist/cli/main.js serve), in a launcher that reports event-loop delay. */
import { execFileSync, fork, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { freePort, median, ROOT } from '../common.js';
import { awaitReady, idleRss, ipcLag, kserveStats, stopProcess, type BenchServer } from './server.js';

const MAIN = join(ROOT, 'dist/cli/nereid.cjs');

export interface GrpcSupport {
  supported: boolean;
  reason: string;
}

/** S4 runs only when `nereid serve --help` lists --grpc-port without "not implemented yet". */
export function grpcSupport(): GrpcSupport {
  if (!existsSync(MAIN)) return { supported: false, reason: 'dist/cli/main.js missing (npm run build)' };
  const help = execFileSync(process.execPath, [MAIN, 'serve', '--help'], { encoding: 'utf8' });
  const line = help.split('\n').findIndex((l) => l.trimStart().startsWith('--grpc-port'));
  if (line < 0) return { supported: false, reason: '`nereid serve --help` does not list --grpc-port' };
  const entry = help
    .split('\n')
    .slice(line, line + 2)
    .join(' ');
  if (/not implemented yet/.test(entry))
    return {
      supported: false,
      reason: '`nereid serve --help`: --grpc-port is "accepted; gRPC is not implemented yet"',
    };
  return { supported: true, reason: '' };
}

async function cliArgs(repo: string, grpc: boolean): Promise<{ args: string[]; http: string; grpc?: string }> {
  const httpPort = await freePort();
  const args = ['serve', `--model-repository=${repo}`, `--http-port=${httpPort}`, '--http-address=127.0.0.1'];
  args.push('--metrics-port=0', '--log-info=false');
  if (!grpc) return { args, http: `127.0.0.1:${httpPort}` };
  const grpcPort = await freePort();
  args.push(`--grpc-port=${grpcPort}`, '--grpc-address=127.0.0.1');
  return { args, http: `127.0.0.1:${httpPort}`, grpc: `127.0.0.1:${grpcPort}` };
}

/**
 * Starts `nereid serve` on `repo` inside bench/nereid-launcher.ts (forked, with IPC for the lag readings).
 * `main` picks the build: this checkout's dist by default, another worktree's for bench/ab.ts.
 */
export async function startNereid(repo: string, grpc: boolean, main = MAIN): Promise<BenchServer> {
  const { args, http, grpc: grpcAddr } = await cliArgs(repo, grpc);
  const t0 = performance.now();
  const child = fork(join(ROOT, 'bench/nereid-launcher.ts'), [main, ...args], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    // The launcher is an ES module run through tsx, so libuv's pool exists before the CLI's entry could size it:
    // give it the size `nereid` itself picks (4 + max(16, cores): onnxruntime runs hold one thread each).
    env: {
      ...process.env,
      UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? String(4 + Math.max(16, availableParallelism())),
    },
  });
  const readyMs = await awaitReady(child, `http://${http}`, t0, 60_000);
  return {
    label: 'nereid',
    pid: child.pid as number,
    http,
    grpc: grpcAddr,
    readyMs,
    stats: (model) => kserveStats(http, model),
    lag: ipcLag(child),
    close: () => stopProcess(child),
  };
}

export interface Startup {
  /** Median spawn-to-ready of plain `node dist/cli/main.js serve` on the example repository, ms. */
  readyMs: number;
  /** RSS after one second idle, MiB (median). */
  idleRssMiB: number;
  runs: number;
}

/** P4: start-to-ready and idle RSS of the plain CLI (no launcher, no tsx) on examples/model_repository. */
export async function measureStartup(runs: number, grpc: boolean): Promise<Startup> {
  const ready: number[] = [];
  const rss: number[] = [];
  for (let i = 0; i < runs; i++) {
    const { args, http } = await cliArgs(join(ROOT, 'examples/model_repository'), grpc);
    const t0 = performance.now();
    const child = spawn(process.execPath, [MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      ready.push(await awaitReady(child, `http://${http}`, t0, 30_000));
      rss.push(await idleRss(child.pid as number, 1000));
    } finally {
      await stopProcess(child);
    }
  }
  return { readyMs: median(ready), idleRssMiB: median(rss), runs };
}
