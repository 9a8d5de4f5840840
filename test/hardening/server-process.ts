import { spawn, type ChildProcess } from 'node:child_process';
import { TEST_FRONTEND_THREADS } from '../helpers/server.js';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * `nereid serve` in a child process, so that a crash shows as an exit (not as the test runner dying) and the
 * server's own memory can be read from /proc (its peak RSS, VmHWM, is the ceiling an abusive client pushed it to).
 */
const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

export interface ServerProcess {
  child: ChildProcess;
  httpUrl: string;
  grpcAddress: string;
  /** Set with `metrics: true`. */
  metricsUrl?: string;
  logs(): string;
  /** Resident and peak resident memory of the server process, in MiB. */
  memory(): { rssMiB: number; peakMiB: number };
  /** Resets the peak (VmHWM) to the current RSS, so the next peak belongs to what runs next. */
  resetPeak(): void;
  exited(): number | null | undefined;
  stop(): Promise<void>;
}

/** What some suites need beyond the defaults (the CLI's own tests: environment, metrics, log formats). */
export interface ServerProcessOptions {
  /** The child's whole environment; default this process's. */
  env?: NodeJS.ProcessEnv;
  /** Serve metrics on a port of their own (127.0.0.1, port 0) and wait for it; default off. */
  metrics?: boolean;
  /** Also wait until the logs match this (a log format's ready line). */
  ready?: RegExp;
}

/**
 * Starts `nereid serve` on port 0 with `args` after the suites' defaults (the last value of a flag wins) and
 * resolves once it logged its ports (and `ready`, if given).
 */
export async function startServerProcess(
  args: string[],
  nodeArgs: string[] = [],
  opts: ServerProcessOptions = {},
): Promise<ServerProcess> {
  const metricsArgs = opts.metrics ? ['--allow-metrics=true', '--metrics-port=0', '--metrics-address=127.0.0.1'] : [];
  const child = spawn(
    process.execPath,
    [
      ...nodeArgs,
      '--conditions=nereid-source',
      '--import',
      'tsx',
      MAIN,
      'serve',
      '--http-port=0',
      '--http-address=127.0.0.1',
      '--grpc-port=0',
      '--grpc-address=127.0.0.1',
      '--allow-metrics=false',
      // The suites' front-end threads (npm run test:threads runs this with 2): bad input meets the threads' proxy too.
      `--http-thread-count=${TEST_FRONTEND_THREADS}`,
      ...metricsArgs,
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env },
  );
  let logs = '';
  let exitCode: number | null | undefined;
  child.once('exit', (code) => (exitCode = code));
  const ports = await new Promise<{ http: number; grpc: number; metrics?: number }>((resolve, reject) => {
    let started = false;
    const timer = setTimeout(() => {
      // Nobody holds the child after a failed start: end it here.
      child.kill('SIGKILL');
      reject(new Error(`nereid did not log its ports${opts.ready ? ' and ready line' : ''} within 60 s:\n${logs}`));
    }, 60_000).unref();
    const onData = (d: Buffer): void => {
      logs += d;
      if (started) return;
      const http = /Started HTTPService at [^:]+:(\d+)/.exec(logs);
      const grpc = /Started GRPCInferenceService at [^\s]+:(\d+)/.exec(logs);
      const metrics = opts.metrics ? /Started Metrics Service at [^:]+:(\d+)/.exec(logs) : undefined;
      if (!http || !grpc || metrics === null || (opts.ready && !opts.ready.test(logs))) return;
      started = true;
      clearTimeout(timer);
      resolve({ http: Number(http[1]), grpc: Number(grpc[1]), metrics: metrics && Number(metrics[1]) });
    };
    child.stderr?.on('data', onData);
    child.stdout?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`nereid exited ${code} before serving:\n${logs}`));
    });
  });
  const status = (field: string): number => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  };
  return {
    child,
    httpUrl: `http://127.0.0.1:${ports.http}`,
    grpcAddress: `127.0.0.1:${ports.grpc}`,
    metricsUrl: ports.metrics === undefined ? undefined : `http://127.0.0.1:${ports.metrics}`,
    logs: () => logs,
    memory: () => ({ rssMiB: Math.round(status('VmRSS')), peakMiB: Math.round(status('VmHWM')) }),
    resetPeak: () => {
      try {
        // Linux: writing 5 to clear_refs resets the peak resident set size.
        writeFileSync(`/proc/${child.pid}/clear_refs`, '5');
      } catch {
        // Not permitted here: peaks then accumulate over the run.
      }
    },
    exited: () => exitCode,
    async stop() {
      if (exitCode !== undefined) return;
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}
