/**
 * Nereid's pytorch backend on the GPU next to bare PyTorch, in one run (scripts/gpu/torch-on-device.sh runs it on
 * the H200): for each TorchScript model, the baseline (scripts/gpu/torch_baseline.py: a plain loop over the same
 * file) and then `nereid serve` with the model on KIND_GPU, loaded with batch-32 requests (KServe v2 HTTP, binary
 * tensors, keep-alive) at a few concurrencies. Throughput is sequences per second; the ratio is Nereid's best over
 * the baseline's host loop (the same work per batch: inputs from the host, output back to the host).
 *
 *   node torch-bench.mjs '{"python":"python3","models":[{"name":"text_encoder_torch","path":".../model.pt",
 *     "vocab":1000}],"batch":32,"seq":128,"ms":5000,"concurrency":[1,2,4,8],"instances":2,"nereid":"dist/cli/nereid.cjs",
 *     "out":"/tmp/out"}'
 *
 * Writes <out>/torch-bench.json and prints a table.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

interface ModelJob {
  name: string;
  path: string;
  vocab: number;
}
interface Job {
  python: string;
  models: ModelJob[];
  batch: number;
  seq: number;
  ms: number;
  concurrency: number[];
  instances: number;
  nereid: string;
  out: string;
  /** 'cpu': a dry run on a machine without a GPU (KIND_CPU, the baseline on the CPU). Default 'cuda'. */
  device?: 'cuda' | 'cpu';
}

const job = JSON.parse(process.argv[2] ?? '{}') as Job;

function config(name: string, instances: number, batch: number): string {
  return `name: "${name}"
platform: "pytorch_libtorch"
max_batch_size: ${batch}
input [
  { name: "input_ids" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "attention_mask" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "token_type_ids" data_type: TYPE_INT32 dims: [ -1 ] }
]
output [ { name: "output" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]
instance_group [ { kind: ${job.device === 'cpu' ? 'KIND_CPU' : 'KIND_GPU'} count: ${instances}${job.device === 'cpu' ? '' : ' gpus: [ 0 ]'} } ]
parameters { key: "INFERENCE_MODE" value { string_value: "true" } }
`;
}

/** One request body: the JSON header, then the three INT32 inputs as binary data. */
function body(m: ModelJob): { buf: Buffer; headerLength: number } {
  const n = job.batch * job.seq;
  const ids = new Int32Array(n);
  for (let i = 0; i < n; i++) ids[i] = (i * 7919) % m.vocab;
  const mask = new Int32Array(n).fill(1);
  const types = new Int32Array(n);
  const input = (name: string) => ({
    name,
    datatype: 'INT32',
    shape: [job.batch, job.seq],
    parameters: { binary_data_size: n * 4 },
  });
  const header = Buffer.from(
    JSON.stringify({
      inputs: [input('input_ids'), input('attention_mask'), input('token_type_ids')],
      outputs: [{ name: 'output', parameters: { binary_data: true } }],
    }),
  );
  const parts = [header, ...[ids, mask, types].map((a) => Buffer.from(a.buffer))];
  return { buf: Buffer.concat(parts), headerLength: header.length };
}

async function load(port: number, model: string, b: { buf: Buffer; headerLength: number }, c: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: c });
  const once = (): Promise<number> =>
    new Promise((res) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          path: `/v2/models/${model}/infer`,
          method: 'POST',
          agent,
          headers: {
            'inference-header-content-length': String(b.headerLength),
            'content-type': 'application/octet-stream',
            'content-length': String(b.buf.length),
          },
        },
        (r) => {
          r.on('data', () => undefined);
          r.on('end', () => res(r.statusCode ?? 0));
        },
      );
      req.on('error', () => res(0));
      req.end(b.buf);
    });
  // Warm-up, then the measured window.
  const warm = Date.now() + 1500;
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (Date.now() < warm) await once();
    }),
  );
  let ok = 0;
  let bad = 0;
  const lat: number[] = [];
  const t0 = performance.now();
  const end = t0 + job.ms;
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        const status = await once();
        if (status === 200) {
          ok++;
          lat.push(performance.now() - t);
        } else bad++;
      }
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  agent.destroy();
  lat.sort((x, y) => x - y);
  return {
    concurrency: c,
    ips: Math.round((ok * job.batch * 10) / wall) / 10,
    p50_ms: Math.round((lat[Math.floor(lat.length / 2)] ?? 0) * 1000) / 1000,
    errors: bad,
  };
}

async function ready(port: number, model: string, server: ChildProcess): Promise<void> {
  const deadline = Date.now() + 300_000;
  while (Date.now() < deadline) {
    if (server.exitCode !== null) throw new Error(`nereid exited with ${server.exitCode}`);
    const ok = await fetch(`http://127.0.0.1:${port}/v2/models/${model}/ready`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${model} not ready after 300 s`);
}

async function main(): Promise<void> {
  mkdirSync(job.out, { recursive: true });
  const rows = [];
  for (const m of job.models) {
    const base = spawnSync(
      job.python,
      [
        'scripts/gpu/torch_baseline.py',
        '--model',
        m.path,
        '--batch',
        String(job.batch),
        '--seq',
        String(job.seq),
        '--ms',
        String(job.ms),
        '--vocab',
        String(m.vocab),
        '--device',
        job.device === 'cpu' ? 'cpu' : 'cuda:0',
      ],
      { encoding: 'utf8', timeout: 600_000 },
    );
    const baseline = JSON.parse(base.stdout.trim().split('\n').pop() ?? '{}') as {
      host_loop: { ips: number; p50_ms: number };
      gpu_only: { ips: number; p50_ms: number };
      torch: string;
      device: string;
    };
    if (base.status !== 0) console.log(base.stderr);
    console.log(`[torch-bench] ${m.name}: bare PyTorch ${JSON.stringify(baseline)}`);

    const repo = mkdtempSync(join(tmpdir(), 'nereid-torch-bench-'));
    mkdirSync(join(repo, m.name, '1'), { recursive: true });
    symlinkSync(resolve(m.path), join(repo, m.name, '1', 'model.pt'));
    writeFileSync(join(repo, m.name, 'config.pbtxt'), config(m.name, job.instances, job.batch));
    const port = 18000 + Math.floor(Math.random() * 1000);
    const server = spawn(
      process.execPath,
      [
        job.nereid,
        'serve',
        `--model-repository=${repo}`,
        `--http-port=${port}`,
        '--grpc-port=0',
        '--metrics-port=0',
        `--backend-config=pytorch,python-executable=${job.python}`,
      ],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
    const results = [];
    try {
      await ready(port, m.name, server);
      for (const c of job.concurrency) {
        const r = await load(port, m.name, body(m), c);
        console.log(`[torch-bench] ${m.name}: nereid ${JSON.stringify(r)}`);
        results.push(r);
      }
    } finally {
      server.kill('SIGTERM');
      await new Promise((r) => server.once('exit', r));
    }
    const best = Math.max(...results.map((r) => r.ips));
    rows.push({
      model: m.name,
      baseline,
      nereid: results,
      ratio: Math.round((best / baseline.host_loop.ips) * 1000) / 1000,
    });
  }
  writeFileSync(join(job.out, 'torch-bench.json'), JSON.stringify({ job, rows }, null, 2));
  console.log('\nmodel | bare PyTorch host loop (seq/s) | GPU only | Nereid best (seq/s, concurrency) | ratio');
  for (const r of rows) {
    const best = r.nereid.reduce((a, b) => (b.ips > a.ips ? b : a));
    console.log(
      `${r.model} | ${r.baseline.host_loop.ips} | ${r.baseline.gpu_only.ips} | ${best.ips} (c=${best.concurrency}) | ${r.ratio}`,
    );
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
