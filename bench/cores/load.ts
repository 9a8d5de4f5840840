/**
 * One load-generator process of the cores benchmark (bench/cores.ts starts several, pinned to the client cores):
 * `connections` closed-loop connections, each with one request in flight, sending a precomputed request as fast as
 * answers come back. Cheaper than any general client (no header objects, no parser beyond status and length), so
 * that the server, not this, is what saturates:
 * - http: KServe v2 binary tensor data over HTTP/1.1 keep-alive, raw bytes on a socket;
 * - grpc: ModelInfer over node:http2, one session per connection, the message serialized once.
 *
 * It counts answers between `--from` and `--to` (epoch ms, shared by every process of a run) and prints one JSON
 * line: { count, errors, histogram } (latency buckets of 2 % width, see bucketOf).
 *
 *   node --import tsx bench/cores/load.ts --protocol http --port 8000 --model simple --connections 16 --from … --to …
 */
import http2 from 'node:http2';
import { connect, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { loadServices } from '../../src/protocol/grpc/proto.js';
import { MODELS, type ModelName } from '../models.js';

const { values: a } = parseArgs({
  options: {
    protocol: { type: 'string', default: 'http' },
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string' },
    model: { type: 'string', default: 'simple' },
    connections: { type: 'string', default: '1' },
    from: { type: 'string' },
    to: { type: 'string' },
  },
});
const spec = MODELS[a.model as ModelName];
const from = Number(a.from);
const to = Number(a.to);
const BUCKETS = 1200;
const histogram = new Array<number>(BUCKETS).fill(0);
let count = 0;
let errors = 0;

/** Latency bucket: 2 % wide from 1 µs (bucket 1200 ≈ 2·10^10 µs). */
const bucketOf = (us: number): number => Math.min(BUCKETS - 1, Math.max(0, Math.floor(Math.log(us) / Math.log(1.02))));

function record(t0: number): void {
  const now = Date.now();
  if (now < from || now >= to) return;
  count++;
  histogram[bucketOf((performance.now() - t0) * 1000)]++;
}

/** The binary-tensor request: JSON header naming binary inputs and outputs, then the raw INT32 inputs. */
function httpRequest(): Buffer {
  const dims = [1, ...spec.sampleDims];
  const blobs = spec.inputs.map((i) => Buffer.from(i.values.buffer, i.values.byteOffset, i.values.byteLength));
  const header = Buffer.from(
    JSON.stringify({
      inputs: spec.inputs.map((i, k) => ({
        name: i.name,
        shape: dims,
        datatype: 'INT32',
        parameters: { binary_data_size: blobs[k].byteLength },
      })),
      parameters: { binary_data_output: true },
    }),
  );
  const body = Buffer.concat([header, ...blobs]);
  const head =
    `POST /v2/models/${spec.name}/infer HTTP/1.1\r\nHost: ${a.host}\r\n` +
    `Content-Type: application/octet-stream\r\nInference-Header-Content-Length: ${header.byteLength}\r\n` +
    `Content-Length: ${body.byteLength}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head), body]);
}

/** One HTTP connection: send, read one whole response (status line, Content-Length, body), repeat. */
function httpConnection(request: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const socket: Socket = connect({ host: a.host, port: Number(a.port), noDelay: true });
    let pending: Buffer = Buffer.alloc(0);
    let t0 = 0;
    const send = (): void => {
      if (Date.now() >= to) {
        socket.end();
        return;
      }
      t0 = performance.now();
      socket.write(request);
    };
    socket.on('connect', send);
    socket.on('data', (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = pending.toString('latin1', 0, end);
        const m = /\r\ncontent-length: *(\d+)/i.exec(head);
        const total = end + 4 + (m ? Number(m[1]) : 0);
        if (pending.length < total) return;
        if (head.startsWith('HTTP/1.1 200')) record(t0);
        else errors++;
        pending = pending.subarray(total);
        send();
      }
    });
    socket.on('error', () => errors++);
    socket.on('close', () => resolve());
  });
}

/** The ModelInfer message, framed once: 1-byte compressed flag, 4-byte big-endian length, the protobuf. */
function grpcFrame(): Buffer {
  const { Inference } = loadServices();
  const method = (Inference.service as unknown as Record<string, { requestSerialize(v: object): Buffer }>).ModelInfer;
  const msg = method.requestSerialize({
    model_name: spec.name,
    inputs: spec.inputs.map((i) => ({ name: i.name, datatype: 'INT32', shape: [1, ...spec.sampleDims] })),
    raw_input_contents: spec.inputs.map((i) => Buffer.from(i.values.buffer, i.values.byteOffset, i.values.byteLength)),
  });
  const frame = Buffer.alloc(5 + msg.byteLength);
  frame.writeUInt32BE(msg.byteLength, 1);
  msg.copy(frame, 5);
  return frame;
}

const GRPC_HEADERS = {
  ':method': 'POST',
  ':path': '/inference.GRPCInferenceService/ModelInfer',
  'content-type': 'application/grpc',
  te: 'trailers',
};

/** One HTTP/2 session with one call in flight at a time. */
function grpcConnection(frame: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const session = http2.connect(`http://${a.host}:${a.port}`);
    session.on('error', () => errors++);
    session.on('close', () => resolve());
    const call = (): void => {
      if (Date.now() >= to) {
        session.close();
        return;
      }
      const t0 = performance.now();
      const stream = session.request(GRPC_HEADERS);
      let status: string | undefined;
      stream.on('trailers', (t) => (status = String(t['grpc-status'])));
      stream.on('response', (h) => {
        if (h['grpc-status'] !== undefined) status = String(h['grpc-status']);
      });
      stream.on('data', () => undefined);
      stream.on('error', () => undefined);
      // 'close' follows the end, an error or a reset alike: one answer, then the next call.
      stream.on('close', () => {
        if (status === '0') record(t0);
        else errors++;
        call();
      });
      stream.end(frame);
    };
    session.on('connect', call);
  });
}

const connections = Number(a.connections);
await Promise.all(
  Array.from({ length: connections }, () =>
    a.protocol === 'grpc' ? grpcConnection(grpcFrame()) : httpConnection(httpRequest()),
  ),
);
process.stdout.write(`${JSON.stringify({ count, errors, histogram })}\n`);
