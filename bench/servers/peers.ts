/**
 * Peers (S6), each started the way its users start it, on a temporary copy of the two models:
 * - fastify: bench/peers/fastify-server.ts (fastify + onnxruntime-node), forked so it reports event-loop delay;
 * - triton: the tritonserver binary of the nvidia-pytriton wheel (2.51, CPU); that build carries only the python
 *   backend, so each model is bench/peers/triton/model.py running onnxruntime (Python);
 * - mlserver: MLServer 1.7 with the custom runtime bench/peers/mlserver/runtime.py (PyPI has no mlserver-onnx),
 *   parallel_workers 0 (1.7's worker pool dies on start here: "There is no current event loop").
 * The Python peers live in .venv/peers/ (bash bench/peers/setup.sh); without it they are reported as skipped.
 */
import { fork, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { copyFile, cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, ROOT } from '../common.js';
import { MODELS } from '../models.js';
import { awaitReady, ipcLag, kserveStats, stopProcess, type BenchServer } from './server.js';

const PEERS_VENV = join(ROOT, '.venv/peers');
const SITE = join(PEERS_VENV, 'lib/python3.11/site-packages');
const PYTRITON = join(SITE, 'pytriton/tritonserver');

/** Why a peer cannot run here, or undefined when it can. */
export function peerUnavailable(label: 'fastify' | 'triton' | 'mlserver'): string | undefined {
  if (label === 'fastify') return undefined;
  if (!existsSync(join(PEERS_VENV, 'bin/python')))
    return '.venv/peers/ missing: run `bash bench/peers/setup.sh` (PyPI: mlserver, onnxruntime, nvidia-pytriton)';
  if (label === 'triton' && !existsSync(join(PYTRITON, 'bin/tritonserver')))
    return 'nvidia-pytriton not installed in .venv/peers (no tritonserver binary)';
  if (label === 'mlserver' && !existsSync(join(PEERS_VENV, 'bin/mlserver')))
    return 'mlserver not installed in .venv/peers';
  return undefined;
}

/** A temporary folder removed when the server closes. */
async function scratch(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `nereid-bench-${prefix}-`));
}

export async function startFastify(repo: string): Promise<BenchServer> {
  const port = await freePort();
  const t0 = performance.now();
  const child = fork(join(ROOT, 'bench/peers/fastify-server.ts'), ['--repository', repo, '--port', String(port)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const http = `127.0.0.1:${port}`;
  const readyMs = await awaitReady(child, `http://${http}`, t0, 60_000);
  return {
    label: 'fastify',
    pid: child.pid as number,
    http,
    readyMs,
    stats: async () => undefined,
    lag: ipcLag(child),
    close: () => stopProcess(child),
  };
}

export async function startTriton(): Promise<BenchServer> {
  const dir = await scratch('triton');
  // As pytriton does: a copy of the server with the stub for this Python next to the python backend.
  await cp(PYTRITON, join(dir, 'server'), { recursive: true });
  await copyFile(
    join(PYTRITON, 'python_backend_stubs/3.11/triton_python_backend_stub'),
    join(dir, 'server/backends/python/triton_python_backend_stub'),
  );
  for (const spec of Object.values(MODELS)) {
    const v1 = join(dir, 'repo', spec.name, '1');
    await mkdir(v1, { recursive: true });
    await copyFile(spec.onnxFile, join(v1, 'model.onnx'));
    await copyFile(join(ROOT, 'bench/peers/triton/model.py'), join(v1, 'model.py'));
    const config = spec.config.replace('platform: "onnxruntime_onnx"', 'backend: "python"');
    await writeFile(join(dir, 'repo', spec.name, 'config.pbtxt'), config);
  }
  const [httpPort, grpcPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
  const t0 = performance.now();
  const child = spawn(
    join(dir, 'server/bin/tritonserver'),
    [
      `--model-repository=${join(dir, 'repo')}`,
      `--backend-directory=${join(dir, 'server/backends')}`,
      '--http-address=127.0.0.1',
      `--http-port=${httpPort}`,
      '--grpc-address=127.0.0.1',
      `--grpc-port=${grpcPort}`,
      `--metrics-port=${metricsPort}`,
      '--allow-gpu-metrics=false',
      '--log-info=false',
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      // The python backend's stub finds numpy and onnxruntime through the venv's python on PATH (as pytriton sets).
      env: {
        ...process.env,
        PATH: `${join(PEERS_VENV, 'bin')}:${process.env.PATH ?? ''}`,
        LD_LIBRARY_PATH: join(SITE, 'nvidia_pytriton.libs'),
      },
    },
  );
  const http = `127.0.0.1:${httpPort}`;
  const readyMs = await awaitReady(child, `http://${http}`, t0, 120_000);
  return {
    label: 'triton',
    pid: child.pid as number,
    http,
    grpc: `127.0.0.1:${grpcPort}`,
    readyMs,
    stats: (model) => kserveStats(http, model),
    close: async () => {
      await stopProcess(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function startMlserver(): Promise<BenchServer> {
  const dir = await scratch('mlserver');
  await copyFile(join(ROOT, 'bench/peers/mlserver/runtime.py'), join(dir, 'runtime.py'));
  for (const spec of Object.values(MODELS)) {
    await mkdir(join(dir, spec.name));
    await copyFile(spec.onnxFile, join(dir, spec.name, 'model.onnx'));
    const settings = { name: spec.name, implementation: 'runtime.OnnxRuntime', parameters: { uri: './model.onnx' } };
    await writeFile(join(dir, spec.name, 'model-settings.json'), JSON.stringify(settings));
  }
  const [httpPort, grpcPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
  const settings = {
    host: '127.0.0.1',
    http_port: httpPort,
    grpc_port: grpcPort,
    metrics_port: metricsPort,
    parallel_workers: 0,
  };
  await writeFile(join(dir, 'settings.json'), JSON.stringify(settings));
  const t0 = performance.now();
  const child = spawn(join(PEERS_VENV, 'bin/mlserver'), ['start', dir], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const http = `127.0.0.1:${httpPort}`;
  const readyMs = await awaitReady(child, `http://${http}`, t0, 120_000);
  return {
    label: 'mlserver',
    pid: child.pid as number,
    http,
    grpc: `127.0.0.1:${grpcPort}`,
    readyMs,
    stats: async () => undefined,
    close: async () => {
      await stopProcess(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The pinned versions installed by bench/peers/setup.sh, for the report. */
export async function peerVersions(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [name, dist] of [
    ['mlserver', 'mlserver'],
    ['triton', 'nvidia_pytriton'],
  ] as const) {
    try {
      const info = readdirSync(SITE).find((d) => d.startsWith(`${dist}-`) && d.endsWith('.dist-info'));
      if (info)
        out[name] = (await readFile(join(SITE, info, 'METADATA'), 'utf8')).match(/^Version: (.+)$/m)?.[1] ?? '?';
    } catch {
      /* not installed */
    }
  }
  return out;
}
