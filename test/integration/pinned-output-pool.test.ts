/**
 * Issue 31 items 1–2 (onnxruntime): outputs written into pooled page-locked memory made once and reused, and HTTP
 * binary responses written to the socket straight from it. A buffer comes back to the pool only when the response
 * viewing it was flushed or abandoned, is never handed out while a response can still read it, and the pool is
 * bounded (a request at the cap waits for a buffer). Runs the real server, the real onnxruntime engine (KIND_CPU: the
 * pool is the same code on a GPU, where onnxruntime's device-to-host copy lands in it) and real sockets; the pool's
 * memory is a TEST DOUBLE of cudaMallocHost (test/helpers/fake-pinned.ts).
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { onnxruntimeBackend } from '../../src/backends/onnxruntime/backend.js';
import { OutputPool } from '../../src/backends/onnxruntime/capi/output-pool.js';
import { metricsSourceFrom, startMetricsServer } from '../../src/metrics/index.js';
import { startHttpServer } from '../../src/protocol/http/server.js';
import { InferenceServer } from '../../src/server/server.js';
import { buildModel, ELEM } from '../fixtures/onnx-builder.js';
import { pinnedAlloc, pinnedFree } from '../helpers/fake-pinned.js';

/** 2 Mi floats (8 MiB, exactly one size class): more than loopback's socket buffers hold, so a write stays pending. */
const N = 2 * 1024 * 1024;
const BYTES = N * 4;

const CONFIG = `name: "plus_one"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`;

/** The same model batching 2 requests: a full batch runs at once, an incomplete one only after 60 s. */
const BATCHED =
  CONFIG.replace('"plus_one"', '"plus_one_batched"').replace('max_batch_size: 8', 'max_batch_size: 2') +
  'dynamic_batching { max_queue_delay_microseconds: 60000000 }\n';

/** Y = X + 1. */
const MODEL = buildModel({
  inputs: [{ name: 'X', elemType: ELEM.FLOAT, dims: ['n', 'w'] }],
  outputs: [{ name: 'Y', elemType: ELEM.FLOAT, dims: ['n', 'w'] }],
  initializers: [{ name: 'ONE', elemType: ELEM.FLOAT, dims: [1], data: new Float32Array([1]) }],
  nodes: [{ op: 'Add', inputs: ['X', 'ONE'], outputs: ['Y'] }],
});

const value = (k: number, i: number): number => k * 1000 + (i % 1000);

function requestBytes(k: number): Buffer {
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'X', datatype: 'FP32', shape: [1, N], parameters: { binary_data_size: BYTES } }],
      outputs: [{ name: 'Y', parameters: { binary_data: true } }],
    }),
  );
  const data = Float32Array.from({ length: N }, (_, i) => value(k, i));
  const head =
    `POST /v2/models/plus_one/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n` +
    `Inference-Header-Content-Length: ${header.length}\r\nContent-Length: ${header.length + BYTES}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head), header, Buffer.from(data.buffer)]);
}

/** One request on a raw socket, not read until `read()`, which resolves with the binary output. */
function rawRequest(port: number, k: number): { socket: Socket; read: () => Promise<Float32Array> } {
  const socket = connect(port, '127.0.0.1');
  socket.write(requestBytes(k));
  socket.pause();
  const read = (): Promise<Float32Array> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      socket.on('error', reject);
      socket.on('data', (c: Buffer) => {
        chunks.push(c);
        const all = Buffer.concat(chunks);
        const end = all.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = all.subarray(0, end).toString();
        assert.match(head, /^HTTP\/1\.1 200/, head);
        const length = Number(/^content-length: (\d+)/im.exec(head)![1]);
        const json = Number(/inference-header-content-length: (\d+)/i.exec(head)![1]);
        if (all.length - end - 4 < length) return;
        socket.destroy();
        const blob = all.subarray(end + 4 + json, end + 4 + length);
        resolve(new Float32Array(blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.byteLength)));
      });
      socket.resume();
    });
  return { socket, read };
}

/** Every element is this request's own answer (X + 1): no byte of another response, none stale. */
function expectOwn(got: Float32Array, k: number, who: string): void {
  assert.equal(got.length, N, `${who}: every element arrived`);
  let wrong = 0;
  for (let i = 0; i < N; i++) if (got[i] !== value(k, i) + 1) wrong++;
  assert.equal(wrong, 0, `${who}: elements not its own`);
}

/** Waits until the server's state says so (no wall-clock bound is asserted; the test's own timeout catches a hang). */
async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; !check(); i++) {
    if (i > 3000) assert.fail(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('pooled page-locked outputs lent to HTTP binary responses (onnxruntime, TEST DOUBLE of cudaMallocHost)', () => {
  const pinned = new Set<ArrayBuffer>();
  let allocations = 0;
  const memory = {
    alloc: (bytes: number) => (allocations++, pinnedAlloc(pinned, bytes)),
    free: (view: Uint8Array) => pinnedFree(pinned, view),
  };
  // Room for two buffers: a third response must wait for one to come back.
  const pool = new OutputPool(memory, 2 * BYTES);
  let dir: string;
  let server: InferenceServer;
  let http: Awaited<ReturnType<typeof startHttpServer>>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'nereid-pinned-pool-'));
    mkdirSync(join(dir, 'plus_one', '1'), { recursive: true });
    writeFileSync(join(dir, 'plus_one', 'config.pbtxt'), CONFIG);
    writeFileSync(join(dir, 'plus_one', '1', 'model.onnx'), MODEL);
    mkdirSync(join(dir, 'plus_one_batched', '1'), { recursive: true });
    writeFileSync(join(dir, 'plus_one_batched', 'config.pbtxt'), BATCHED);
    writeFileSync(join(dir, 'plus_one_batched', '1', 'model.onnx'), MODEL);
    server = await InferenceServer.create({
      repositories: [dir],
      backends: [onnxruntimeBackend({ outputPoolFor: () => pool })],
    });
    http = await startHttpServer(server, { host: '127.0.0.1', port: 0 });
    // The first run of a shape learns its output shapes (onnxruntime allocates); later ones run into the pool.
    expectOwn(await rawRequest(http.port, 0).read(), 0, 'warm-up');
  });
  after(async () => {
    await http?.close();
    await server?.close();
    pool.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a slow reader keeps its buffer; later requests get other buffers, then reuse without a new allocation', async () => {
    const slow = rawRequest(http.port, 1);
    await until('the slow response holds a buffer', () => pool.stats().lentBytes === BYTES);
    for (let k = 2; k <= 4; k++) expectOwn(await rawRequest(http.port, k).read(), k, `request ${k}`);
    // Requests 2..4 came one after another: each buffer was back before the next, so one more buffer served them.
    assert.equal(allocations, 2);
    assert.equal(pool.stats().bytes, 2 * BYTES);
    expectOwn(await slow.read(), 1, 'the slow client');
    await until('every buffer is back', () => pool.stats().lentBytes === 0);
    expectOwn(await rawRequest(http.port, 5).read(), 5, 'request 5');
    assert.equal(allocations, 2, 'reused, not allocated again');
  });

  it('a client that goes away mid-write gives its buffer back (stream.finished)', async () => {
    const gone = rawRequest(http.port, 6);
    await until('the response holds a buffer', () => pool.stats().lentBytes === BYTES);
    gone.socket.destroy();
    await until('the abandoned buffer is back', () => pool.stats().lentBytes === 0);
    expectOwn(await rawRequest(http.port, 7).read(), 7, 'request 7');
  });

  it('at the cap a request waits for a buffer (never shares one), and is answered once one comes back', async () => {
    const waitsBefore = pool.stats().waits;
    const a = rawRequest(http.port, 8);
    await until('a holds a buffer', () => pool.stats().lentBytes === BYTES);
    const b = rawRequest(http.port, 9);
    await until('b holds the other', () => pool.stats().lentBytes === 2 * BYTES);
    const c = rawRequest(http.port, 10);
    await until('c waits', () => pool.stats().waits === waitsBefore + 1);
    assert.equal(pool.stats().bytes, 2 * BYTES, 'the pool stays at its cap');
    const readC = c.read();
    expectOwn(await a.read(), 8, 'a');
    expectOwn(await readC, 10, 'c, in the buffer a gave back');
    expectOwn(await b.read(), 9, 'b');
    await until('every buffer is back', () => pool.stats().lentBytes === 0);
    assert.equal(allocations, 2);
  });

  it('the pool is observable: nv_pinned_memory_pool_total_bytes / _used_bytes and the waits', async () => {
    const metrics = await startMetricsServer(
      { ...metricsSourceFrom(server), pinnedPool: () => pool.stats() },
      { port: 0, host: '127.0.0.1', allowCpuMetrics: false, allowGpuMetrics: false },
    );
    const scrape = async (): Promise<Record<string, number>> => {
      const text = await (await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).text();
      const pick = (name: string): number => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1]);
      return {
        total: pick('nv_pinned_memory_pool_total_bytes'),
        used: pick('nv_pinned_memory_pool_used_bytes'),
        waits: pick('nereid_pinned_memory_pool_waits_total'),
      };
    };
    try {
      const slow = rawRequest(http.port, 11);
      await until('the slow response holds a buffer', () => pool.stats().lentBytes === BYTES);
      assert.deepEqual(await scrape(), { total: 2 * BYTES, used: BYTES, waits: pool.stats().waits });
      expectOwn(await slow.read(), 11, 'the slow client');
      await until('every buffer is back', () => pool.stats().lentBytes === 0);
      assert.equal((await scrape()).used, 0);
    } finally {
      await metrics.close();
    }
  });

  it('a response that cannot view (no caller to release it) takes no pooled buffer: its outputs own their memory', async () => {
    const res = await server.infer({
      model: 'plus_one',
      inputs: [{ name: 'X', datatype: 'FP32', shape: [1, N], data: Float32Array.from({ length: N }, (_, i) => i) }],
    });
    assert.equal(res.lease, undefined);
    assert.equal(pool.stats().lentBytes, 0);
    const y = res.outputs[0].data as Float32Array;
    assert.ok(!pinned.has(y.buffer as ArrayBuffer), 'the output owns its memory');
    assert.equal(y[N - 1], N);
  });

  it("a batch's joined inputs are staged in a pooled buffer (one DMA to a GPU) and it is back after the run", async () => {
    const n = 1024;
    const infer = (k: number) =>
      server.infer({
        model: 'plus_one_batched',
        inputs: [
          { name: 'X', datatype: 'FP32', shape: [1, n], data: Float32Array.from({ length: n }, (_, i) => value(k, i)) },
        ],
      });
    const before = allocations;
    const answers = await Promise.all([infer(1), infer(2)]);
    const stats = server.modelStatistics('plus_one_batched')[0];
    assert.deepEqual([stats.inference_count, stats.execution_count], [2, 1], 'the two requests ran as one batch');
    answers.forEach((res, k) => {
      const y = res.outputs[0].data as Float32Array;
      assert.equal(y.length, n);
      assert.ok(
        y.every((x, i) => x === value(k + 1, i) + 1),
        `request ${k + 1} got its own answer`,
      );
    });
    assert.equal(
      allocations,
      before + 1,
      'one 64 KiB staging buffer (the outputs of a non-viewing batch are not pooled)',
    );
    assert.equal(pool.stats().lentBytes, 0, 'the staging buffer is back once the run is over');
  });
});
