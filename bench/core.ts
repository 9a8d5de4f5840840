/**
 * Core benchmark: start-to-ready time and idle RSS of `nereid serve` on the example
 * repository, then requests/s for `simple` over HTTP binary at concurrency 1 and 16, next to raw
 * onnxruntime-node in-process, all in one run (ratios, since these machines are noisy).
 *
 *   npm run build && node --import tsx bench/core.ts [--seconds 5]
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { percentile, postBinaryInfer, rssMiB } from './common.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const seconds = Number(process.argv[process.argv.indexOf('--seconds') + 1]) || 5;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Result {
  name: string;
  concurrency: number;
  rps: number;
  p50_us: number;
  p99_us: number;
}

async function loop(name: string, concurrency: number, once: () => Promise<void>): Promise<Result> {
  const lat: number[] = [];
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await once();
        lat.push((performance.now() - t) * 1000);
      }
    }),
  );
  lat.sort((a, b) => a - b);
  return { name, concurrency, rps: lat.length / seconds, p50_us: percentile(lat, 50), p99_us: percentile(lat, 99) };
}

function binaryRequest(): { body: Buffer; headerLength: number } {
  const header = Buffer.from(
    JSON.stringify({
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
      ],
      outputs: [
        { name: 'OUTPUT0', parameters: { binary_data: true } },
        { name: 'OUTPUT1', parameters: { binary_data: true } },
      ],
    }),
  );
  const a = Buffer.from(new Int32Array(16).map((_, i) => i).buffer);
  const b = Buffer.from(new Int32Array(16).fill(1).buffer);
  return { body: Buffer.concat([header, a, b]), headerLength: header.length };
}

async function main(): Promise<void> {
  const results: Result[] = [];
  // Raw onnxruntime-node in-process: the limit. run() holds the JS thread, so concurrency 16 serializes.
  const session = await ort.InferenceSession.create(`${root}/examples/model_repository/simple/1/model.onnx`);
  const feeds = {
    INPUT0: new ort.Tensor('int32', new Int32Array(16), [1, 16]),
    INPUT1: new ort.Tensor('int32', new Int32Array(16), [1, 16]),
  };
  for (const c of [1, 16])
    results.push(await loop('raw onnxruntime-node', c, async () => void (await session.run(feeds))));
  await session.release();

  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [
      `${root}/dist/cli/nereid.cjs`,
      'serve',
      '--model-repository',
      `${root}/examples/model_repository`,
      '--http-port=18000',
      '--log-info=false',
    ],
    { stdio: 'inherit' },
  );
  try {
    let ready = 0;
    while (!ready) {
      try {
        const res = await fetch('http://127.0.0.1:18000/v2/health/ready');
        if (res.status === 200) ready = performance.now() - t0;
      } catch {
        /* not listening yet */
      }
      if (!ready) await sleep(5);
    }
    await sleep(1000);
    const idle = rssMiB(child.pid as number);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    const { body, headerLength } = binaryRequest();
    const once = (): Promise<void> => postBinaryInfer(agent, 18000, 'simple', body, headerLength);
    for (const c of [1, 16]) results.push(await loop('nereid HTTP binary', c, once));
    const loaded = rssMiB(child.pid as number);
    agent.destroy();
    console.log(
      `start-to-ready: ${ready.toFixed(0)} ms; idle RSS: ${idle.toFixed(1)} MiB; RSS after load: ${loaded.toFixed(1)} MiB`,
    );
    console.log('| scenario | concurrency | req/s | p50 µs | p99 µs | ratio to raw |');
    console.log('|---|---|---|---|---|---|');
    for (const r of results) {
      const raw = results.find((x) => x.name.startsWith('raw') && x.concurrency === r.concurrency) as Result;
      console.log(
        `| ${r.name} | ${r.concurrency} | ${r.rps.toFixed(0)} | ${r.p50_us.toFixed(0)} | ${r.p99_us.toFixed(0)} | ${(r.rps / raw.rps).toFixed(2)} |`,
      );
    }
  } finally {
    child.kill('SIGTERM');
  }
}

await main();
