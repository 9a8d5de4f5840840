import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { NereidGrpcClient } from '../../src/client/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';
import { FIXTURES } from '../helpers/python-models.js';

/**
 * HTTP binary responses written straight from the python child's shared-memory block (no copy on the host): the
 * block is the child's again only once the response is flushed to the socket. A client that stops reading holds
 * its block; requests after it get blocks of their own, and the slow client still reads exactly its own bytes.
 */

/** 2 Mi floats (8 MiB): more than loopback's socket buffers hold, so the server's write stays pending. */
const N = 2 * 1024 * 1024;

function requestBytes(model: string, k: number): Buffer {
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, N], parameters: { binary_data_size: N * 4 } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    }),
  );
  const data = new Float32Array(N);
  for (let i = 0; i < N; i++) data[i] = k * 1000 + (i % 1000);
  const head =
    `POST /v2/models/${model}/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n` +
    `Inference-Header-Content-Length: ${header.length}\r\nContent-Length: ${header.length + N * 4}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head), header, Buffer.from(data.buffer)]);
}

/** Sends one request on a raw socket; `read()` then reads the whole response and returns its binary output. */
function rawRequest(port: number, model: string, k: number): { socket: Socket; read: () => Promise<Float32Array> } {
  const socket = connect(port, '127.0.0.1');
  socket.write(requestBytes(model, k));
  socket.pause();
  const read = () =>
    new Promise<Float32Array>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let total = 0;
      let want = -1;
      let bodyAt = -1;
      let headerLength = 0;
      socket.on('error', reject);
      socket.on('data', (c: Buffer) => {
        chunks.push(c);
        total += c.length;
        if (bodyAt < 0) {
          const all = Buffer.concat(chunks);
          const end = all.indexOf('\r\n\r\n');
          if (end < 0) return;
          const head = all.subarray(0, end).toString();
          assert.match(head, /^HTTP\/1\.1 200/, head);
          want = Number(/^content-length: (\d+)/im.exec(head)![1]);
          headerLength = Number(/inference-header-content-length: (\d+)/i.exec(head)![1]);
          bodyAt = end + 4;
        }
        if (total - bodyAt >= want) {
          socket.destroy();
          const all = Buffer.concat(chunks);
          const blob = all.subarray(bodyAt + headerLength, bodyAt + want);
          resolve(new Float32Array(blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.byteLength)));
        }
      });
      socket.resume();
    });
  return { socket, read };
}

const expectOwn = (got: Float32Array, k: number, who: string) => {
  assert.equal(got.length, N, `${who}: every element arrived`);
  for (const i of [0, 1, 999, 1000, N / 2 + 3, N - 1]) assert.equal(got[i], k * 1000 + (i % 1000), `${who}[${i}]`);
};

describe('HTTP binary outputs written from the engine process memory (lent blocks)', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({ repositories: [FIXTURES], modelControlMode: 'explicit', loadModels: ['identity'] });
  });
  after(() => s?.close());
  const port = () => Number(new URL(s.url).port);

  it('a client that stops reading keeps its own bytes while later requests are answered', async () => {
    const slow = rawRequest(port(), 'identity', 1);
    // Later requests, each reading at once, with other values: they must not get (or overwrite) the slow block.
    for (let k = 2; k <= 5; k++) expectOwn(await rawRequest(port(), 'identity', k).read(), k, `request ${k}`);
    expectOwn(await slow.read(), 1, 'the slow client');
  });

  it('a client that goes away mid-response costs nothing: the next requests are answered', async () => {
    for (let k = 0; k < 3; k++) {
      const gone = rawRequest(port(), 'identity', 10 + k);
      await new Promise((r) => setTimeout(r, 50));
      gone.socket.destroy();
    }
    for (let k = 20; k < 23; k++) expectOwn(await rawRequest(port(), 'identity', k).read(), k, `request ${k}`);
  });
});

/** Segments the python children of this process made for their answers (`<prefix>c<n>`). */
function childSegments(): string[] {
  return readdirSync('/dev/shm').filter((n) => n.startsWith(`nereid_python_${process.pid}x`) && /c\d+$/.test(n));
}

describe('gRPC raw outputs serialized from the engine process memory (lent blocks)', () => {
  let s: TestServer;
  let client: NereidGrpcClient;
  before(async () => {
    s = await startNereid({ repositories: [FIXTURES], modelControlMode: 'explicit', loadModels: ['identity'] });
    client = new NereidGrpcClient({ address: `127.0.0.1:${s.grpcPort}` });
  });
  after(async () => {
    client?.close();
    await s?.close();
  });

  it('every answer carries its own bytes and every block goes back to the child once serialized', async () => {
    const call = (k: number) => {
      const data = new Float32Array(N);
      for (let i = 0; i < N; i++) data[i] = k * 1000 + (i % 1000);
      return client.infer('identity', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, N], data }]);
    };
    let first = 0;
    for (let round = 0; round < 7; round++) {
      const answers = await Promise.all([0, 1, 2, 3].map((j) => call(round * 4 + j)));
      answers.forEach((a, j) =>
        expectOwn(a.outputs[0].data as Float32Array, round * 4 + j, `request ${round * 4 + j}`),
      );
      if (round === 0) first = childSegments().length;
    }
    // 24 more answers of 8 MiB after the first 4: a block never given back would make the child map new segments
    // for later answers (192 MiB of them: checked by mutation); given back, the first round's segments serve all.
    const segments = childSegments();
    assert.equal(
      segments.length,
      first,
      `child segments after the first round and after 28 answers: ${segments.join(' ')}`,
    );
  });

  it('BAD CALL - a call cancelled before its answer costs nothing: the next calls are answered', async () => {
    for (let k = 0; k < 3; k++) {
      const controller = new AbortController();
      const data = new Float32Array(N).fill(k);
      const gone = client.infer('identity', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, N], data }], {
        signal: controller.signal,
      });
      setTimeout(() => controller.abort(), 20);
      await assert.rejects(gone);
    }
    for (let k = 30; k < 33; k++) {
      const data = new Float32Array(N);
      for (let i = 0; i < N; i++) data[i] = k * 1000 + (i % 1000);
      const a = await client.infer('identity', [{ name: 'INPUT0', datatype: 'FP32', shape: [1, N], data }]);
      expectOwn(a.outputs[0].data as Float32Array, k, `request ${k}`);
    }
  });
});
