/**
 * The memory ceiling under each abusive client: every scenario runs against a fresh `nereid serve` child process and
 * reports the server's resident memory before and its peak (VmHWM) after, so a limit that works shows as a bounded
 * peak. A measurement, not a test (minutes, gigabytes on the client side): run it by hand,
 *   node --conditions=nereid-source --import tsx test/hardening/abusive-clients.ts [scenario...]
 * The numbers in the hardening report come from here.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { connect as connectHttp2 } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { loadServices } from '../../src/protocol/grpc/proto.js';
import { writeFillModel } from '../fixtures/fill-model.js';
import { EXAMPLES } from '../helpers/server.js';
import { startServerProcess, type ServerProcess } from './server-process.js';

async function fillRepo(): Promise<string> {
  const repo = await mkdtemp(join(tmpdir(), 'nereid-abuse-'));
  // A long JSON number per element: the JSON answer is as large as it gets per element.
  await writeFillModel(repo, 0.123456789);
  return repo;
}

const fillJson = (n: number, binary: boolean): string =>
  JSON.stringify({
    inputs: [{ name: 'SHAPE', shape: [1], datatype: 'INT64', data: [n] }],
    outputs: [{ name: 'OUT', parameters: { binary_data: binary } }],
  });

interface Scenario {
  name: string;
  args: string[];
  run(s: ServerProcess): Promise<string>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function rawConnect(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1', () => resolve(sock));
    sock.once('error', reject);
  });
}

async function timed(p: Promise<Response>): Promise<string> {
  const t = Date.now();
  const res = await p;
  const text = await res.text();
  return `${res.status} in ${((Date.now() - t) / 1000).toFixed(1)} s ${res.status >= 400 ? text.slice(0, 90) : `(${text.length} bytes)`}`;
}

const SCENARIOS = (repo: string): Scenario[] => [
  {
    name: '256M-element output as JSON, default --max-response-bytes (INT32_MAX)',
    args: [`--model-repository=${repo}`],
    run: async (s) =>
      timed(fetch(`${s.httpUrl}/v2/models/fill/infer`, { method: 'POST', body: fillJson(2 ** 28, false) })),
  },
  {
    name: '256M-element output as JSON, --max-response-bytes=268435456',
    args: [`--model-repository=${repo}`, '--max-response-bytes=268435456'],
    run: async (s) =>
      timed(fetch(`${s.httpUrl}/v2/models/fill/infer`, { method: 'POST', body: fillJson(2 ** 28, false) })),
  },
  {
    name: 'gRPC message of 0.5 MB gzip inflating to 512 MiB (default --grpc-max-input-size 64 MiB)',
    args: [`--model-repository=${EXAMPLES}`],
    run: async (s) => {
      const { Inference } = loadServices();
      const client = new Inference(s.grpcAddress, grpc.credentials.createInsecure(), {
        'grpc.default_compression_algorithm': 2,
        'grpc.max_send_message_length': -1,
      }) as unknown as Record<string, (r: object, cb: (e: grpc.ServiceError | null) => void) => void> & {
        close(): void;
      };
      const zeros = Buffer.alloc(512 * 1024 * 1024);
      const err = await new Promise<grpc.ServiceError | null>((resolve) =>
        client.ModelInfer(
          {
            model_name: 'simple',
            inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }],
            raw_input_contents: [zeros],
          },
          resolve,
        ),
      );
      client.close();
      return `${err ? grpc.status[err.code] : 'OK'}: ${err?.details.slice(0, 80)}`;
    },
  },
  {
    name: 'BYTES shape [1, 33000000] in a 200-byte request',
    args: [`--model-repository=${EXAMPLES}`],
    run: async (s) => {
      const header = Buffer.from(
        JSON.stringify({
          inputs: [{ name: 'INPUT0', shape: [1, 33_000_000], datatype: 'BYTES', parameters: { binary_data_size: 5 } }],
        }),
      );
      return timed(
        fetch(`${s.httpUrl}/v2/models/simple/infer`, {
          method: 'POST',
          headers: { 'Inference-Header-Content-Length': String(header.length) },
          body: Buffer.concat([header, Buffer.from([1, 0, 0, 0, 65])]),
        }),
      );
    },
  },
  ...[256, 16].map((pool): Scenario => ({
    name: `ModelStreamInfer client that never reads: 1000 requests of 1 MiB responses, --grpc-max-response-pool-size=${pool}`,
    args: [`--model-repository=${repo}`, `--grpc-max-response-pool-size=${pool}`],
    run: async (s) => {
      const serialize = (
        loadServices().Inference.service as unknown as Record<string, { requestSerialize(v: object): Buffer }>
      ).ModelStreamInfer.requestSerialize;
      const shape = Buffer.alloc(8);
      shape.writeBigInt64LE(256n * 1024n);
      const msg = serialize({
        model_name: 'fill',
        inputs: [{ name: 'SHAPE', datatype: 'INT64', shape: [1] }],
        raw_input_contents: [shape],
      });
      const frame = Buffer.alloc(5 + msg.length);
      frame.writeUInt32BE(msg.length, 1);
      msg.copy(frame, 5);
      const session = connectHttp2(`http://${s.grpcAddress}`);
      session.on('error', () => undefined);
      const stream = session.request({
        ':method': 'POST',
        ':path': '/inference.GRPCInferenceService/ModelStreamInfer',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      stream.on('error', () => undefined);
      stream.pause();
      for (let i = 0; i < 1000; i++) stream.write(frame);
      await sleep(8000);
      const stats = (await (await fetch(`${s.httpUrl}/v2/models/fill/stats`)).json()) as {
        model_stats: { inference_count: number }[];
      };
      session.destroy();
      return `the server ran ${stats.model_stats[0].inference_count} of 1000`;
    },
  })),
  {
    name: '1000 HTTP connections each declaring a 64 MiB body, sending 1 KiB, then stalling',
    args: [`--model-repository=${EXAMPLES}`],
    run: async (s) => {
      const port = Number(new URL(s.httpUrl).port);
      const socks: Socket[] = [];
      for (let i = 0; i < 1000; i++) {
        const sock = await rawConnect(port);
        sock.on('error', () => undefined);
        sock.write(
          `POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\n${'x'.repeat(1024)}`,
        );
        socks.push(sock);
      }
      await sleep(3000);
      const live = await timed(fetch(`${s.httpUrl}/v2/health/live`));
      for (const sock of socks) sock.destroy();
      return `health meanwhile: ${live}`;
    },
  },
  {
    name: '5000 idle HTTP connections (default --http-max-connections 4096)',
    args: [`--model-repository=${EXAMPLES}`],
    run: async (s) => {
      const port = Number(new URL(s.httpUrl).port);
      const socks: Socket[] = [];
      let refused = 0;
      for (let i = 0; i < 5000; i++) {
        const sock = await rawConnect(port).catch(() => undefined);
        if (!sock) {
          refused++;
          continue;
        }
        sock.on('error', () => undefined);
        sock.on('close', () => refused++);
        socks.push(sock);
      }
      await sleep(1000);
      const live = await timed(fetch(`${s.httpUrl}/v2/health/live`)).catch((e: Error) => `health failed: ${e.message}`);
      for (const sock of socks) sock.destroy();
      return `${refused} refused; health meanwhile: ${live}`;
    },
  },
  {
    name: 'JSON nested 250k levels to the repository index and the logging API',
    args: [`--model-repository=${EXAMPLES}`],
    run: async (s) => {
      const a = await timed(
        fetch(`${s.httpUrl}/v2/repository/index`, { method: 'POST', body: '['.repeat(250_000) + ']'.repeat(250_000) }),
      );
      const b = await timed(
        fetch(`${s.httpUrl}/v2/logging`, {
          method: 'POST',
          body: `{"log_info":${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}}`,
        }),
      );
      return `${a}; ${b}`;
    },
  },
];

async function main(): Promise<void> {
  const repo = await fillRepo();
  const only = process.argv.slice(2).map(Number);
  try {
    for (const [i, sc] of SCENARIOS(repo).entries()) {
      if (only.length > 0 && !only.includes(i)) continue;
      const s = await startServerProcess([...sc.args, '--exit-timeout-secs=1']);
      try {
        await sleep(500);
        const before = s.memory();
        const outcome = await sc.run(s).catch((e: Error) => `client error: ${e.message}`);
        await sleep(300);
        const after = s.memory();
        const alive = s.exited() === undefined ? 'alive' : `EXITED ${s.exited()}`;
        console.log(
          `${i}. ${sc.name}\n   ${outcome}\n   server ${alive}; RSS before ${before.rssMiB} MiB, peak ${after.peakMiB} MiB (+${after.peakMiB - before.rssMiB}), after ${after.rssMiB} MiB`,
        );
      } finally {
        await s.stop();
      }
    }
  } finally {
    await rm(repo, { recursive: true, force: true });
  }
}

await main();
