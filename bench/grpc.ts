/**
 * gRPC benchmark: requests/s for `simple` over gRPC (unary ModelInfer, raw contents, and one
 * ModelStreamInfer stream per worker) at concurrency 1 and 16, next to HTTP binary, against the same
 * server process in the same run (ratios, since these machines are noisy). The server is
 * bench/grpc-server.ts in a child process; the load comes from this one (a grpc-js client on one channel,
 * as tritonclient uses; an HTTP keep-alive agent).
 *
 *   node --import tsx bench/grpc.ts [--seconds 5]
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type * as grpc from '@grpc/grpc-js';
import { callUnary, inferenceClient, simpleRaw } from '../test/helpers/grpc.js';
import { percentile, postBinaryInfer } from './common.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const seconds = Number(process.argv[process.argv.indexOf('--seconds') + 1]) || 5;

interface Result {
  name: string;
  concurrency: number;
  rps: number;
  p50_us: number;
  p99_us: number;
}

async function loop(name: string, concurrency: number, once: (worker: number) => Promise<void>): Promise<Result> {
  // Short warm-up so JIT and connection set-up stay out of the numbers.
  const warm = performance.now() + 500;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      while (performance.now() < warm) await once(w);
    }),
  );
  const lat: number[] = [];
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      while (performance.now() < end) {
        const t = performance.now();
        await once(w);
        lat.push((performance.now() - t) * 1000);
      }
    }),
  );
  lat.sort((a, b) => a - b);
  return { name, concurrency, rps: lat.length / seconds, p50_us: percentile(lat, 50), p99_us: percentile(lat, 99) };
}

function httpBinary(port: number, agent: http.Agent): () => Promise<void> {
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
  const body = Buffer.concat([
    header,
    Buffer.from(new Int32Array(16).map((_, i) => i).buffer),
    Buffer.from(new Int32Array(16).fill(1).buffer),
  ]);
  return () => postBinaryInfer(agent, port, 'simple', body, header.length);
}

/** One long-lived stream per worker; each call writes a request and waits for its response. */
function streamWorkers(client: grpc.Client, n: number): { once(w: number): Promise<void>; close(): void } {
  const streams = Array.from({ length: n }, () => {
    const call = (
      client as unknown as { ModelStreamInfer(): grpc.ClientDuplexStream<object, { error_message: string }> }
    ).ModelStreamInfer();
    const waiting: ((err?: Error) => void)[] = [];
    call.on('data', (r: { error_message: string }) =>
      waiting.shift()?.(r.error_message ? new Error(r.error_message) : undefined),
    );
    call.on('error', () => {});
    return { call, waiting };
  });
  const request = simpleRaw();
  return {
    once: (w) =>
      new Promise<void>((resolve, reject) => {
        const s = streams[w];
        s.waiting.push((err) => (err ? reject(err) : resolve()));
        s.call.write(request);
      }),
    close: () => streams.forEach((s) => s.call.end()),
  };
}

async function main(): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', `${root}/bench/grpc-server.ts`], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ready = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('READY ')) resolve(line);
    });
  });
  const [, httpPort, grpcPort] = ready.split(' ').map(Number);
  const results: Result[] = [];
  try {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    const client = inferenceClient(`127.0.0.1:${grpcPort}`);
    const request = simpleRaw();
    const unary = (): Promise<void> => callUnary(client, 'ModelInfer', request).then(() => undefined);
    for (const c of [1, 16]) {
      results.push(await loop('HTTP binary', c, httpBinary(httpPort, agent)));
      results.push(await loop('gRPC ModelInfer (raw)', c, unary));
      const streams = streamWorkers(client, c);
      results.push(await loop('gRPC ModelStreamInfer', c, streams.once));
      streams.close();
    }
    agent.destroy();
    client.close();
  } finally {
    child.kill('SIGTERM');
  }
  const base = new Map(results.filter((r) => r.name === 'HTTP binary').map((r) => [r.concurrency, r.rps]));
  console.log(`simple, ${seconds} s per row, node ${process.version}`);
  console.log('| scenario | concurrency | req/s | p50 µs | p99 µs | vs HTTP binary |');
  console.log('|---|---|---|---|---|---|');
  for (const r of results) {
    const ratio = r.rps / (base.get(r.concurrency) ?? r.rps);
    console.log(
      `| ${r.name} | ${r.concurrency} | ${r.rps.toFixed(0)} | ${r.p50_us.toFixed(0)} | ${r.p99_us.toFixed(0)} | ${ratio.toFixed(2)}× |`,
    );
  }
}

await main();
