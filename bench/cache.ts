/**
 * Response cache hit speed-up over HTTP (KServe JSON): the same model with `response_cache { enable: true }`,
 * asked with a new input every time (every request a miss: compute plus insertion) and with one input over and
 * over (every request after the first a hit), at concurrency 1 and 16. Model: a 512×512 matmul per row (a model
 * with real work) and the example `text_encoder`.
 *
 *   npm run build && node --import tsx bench/cache.ts [--seconds 2]
 */
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { matmulModel, writeModel } from '../test/fixtures/onnx-builder.js';
import { median, percentile, progress, ROOT } from './common.js';
import { MODELS } from './models.js';

const dist = new URL('../dist/serve.js', import.meta.url).href;
const { serve } = (await import(dist)) as typeof import('../src/serve.js');

const i = process.argv.indexOf('--seconds');
const SECONDS = i >= 0 ? Number(process.argv[i + 1]) : 2;
const MM = 512;

const repo = await mkdtemp(join(tmpdir(), 'nereid-bench-cache-'));
await mkdir(join(repo, 'mm', '1'), { recursive: true });
await writeModel(join(repo, 'mm', '1', 'model.onnx'), matmulModel(MM));
await writeFile(
  join(repo, 'mm', 'config.pbtxt'),
  `name: "mm" backend: "onnxruntime" max_batch_size: 8
   input [{ name: "X" data_type: TYPE_FP32 dims: [ ${MM} ] }] output [{ name: "Y" data_type: TYPE_FP32 dims: [ ${MM} ] }]
   instance_group [{ count: 1 kind: KIND_CPU }] response_cache { enable: true }`,
);
const te = MODELS.text_encoder;
await mkdir(join(repo, 'text_encoder', '1'), { recursive: true });
await copyFile(
  join(ROOT, 'examples/model_repository/text_encoder/1/model.onnx'),
  join(repo, 'text_encoder', '1', 'model.onnx'),
);
await writeFile(
  join(repo, 'text_encoder', 'config.pbtxt'),
  `${te.config}instance_group [{ count: 1 kind: KIND_CPU }]\nresponse_cache { enable: true }\n`,
);

const running = await serve({
  repositories: [repo],
  httpPort: 0,
  httpAddress: '127.0.0.1',
  allowGrpc: false,
  allowMetrics: false,
  responseCacheBytes: 256 << 20,
});
const port = running.httpPort as number;

/** A JSON body; `salt` changes one value so that every salted request has its own cache key. */
function body(model: string, salt: number): string {
  if (model === 'mm') {
    const data = Array.from({ length: MM }, (_, k) => (k % 7) / 7);
    data[0] = salt;
    return JSON.stringify({ inputs: [{ name: 'X', shape: [1, MM], datatype: 'FP32', data }] });
  }
  return JSON.stringify({
    inputs: te.inputs.map((inp, k) => {
      const data = Array.from(inp.values);
      if (k === 0) data[0] = salt % 1000;
      if (k === 0) data[1] = Math.floor(salt / 1000) % 1000;
      return { name: inp.name, shape: [1, ...te.sampleDims], datatype: 'INT32', data };
    }),
  });
}

function post(agent: http.Agent, model: string, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: `/v2/models/${model}/infer`, method: 'POST', agent },
      (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

let salt = 1;
async function run(model: string, concurrency: number, hit: boolean) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const fixed = body(model, 0);
  await post(agent, model, fixed); // the one miss of the hit run
  const lat: number[] = [];
  const end = performance.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const text = hit ? fixed : body(model, salt++);
        const t = performance.now();
        await post(agent, model, text);
        lat.push(performance.now() - t);
      }
    }),
  );
  agent.destroy();
  lat.sort((a, b) => a - b);
  return { rps: lat.length / SECONDS, p50: percentile(lat, 50), p99: percentile(lat, 99) };
}

const lines: string[] = [];
try {
  for (const model of ['mm', 'text_encoder']) {
    for (const concurrency of [1, 16]) {
      progress(`${model} concurrency ${concurrency}`);
      const miss = [];
      const hits = [];
      for (let r = 0; r < 3; r++) {
        miss.push(await run(model, concurrency, false));
        hits.push(await run(model, concurrency, true));
      }
      const m = {
        rps: median(miss.map((x) => x.rps)),
        p50: median(miss.map((x) => x.p50)),
        p99: median(miss.map((x) => x.p99)),
      };
      const h = {
        rps: median(hits.map((x) => x.rps)),
        p50: median(hits.map((x) => x.p50)),
        p99: median(hits.map((x) => x.p99)),
      };
      lines.push(
        `${model.padEnd(12)} c=${String(concurrency).padEnd(2)}  miss ${m.rps.toFixed(0).padStart(6)} req/s p50 ${m.p50.toFixed(2)} ms p99 ${m.p99.toFixed(2)} ms | hit ${h.rps.toFixed(0).padStart(6)} req/s p50 ${h.p50.toFixed(2)} ms p99 ${h.p99.toFixed(2)} ms | speed-up ${(h.rps / m.rps).toFixed(2)}× throughput, ${(m.p50 / h.p50).toFixed(2)}× p50`,
      );
    }
  }
} finally {
  await running.close();
  await rm(repo, { recursive: true, force: true });
}
process.stdout.write(`${lines.join('\n')}\n`);
