import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { gunzipSync, gzipSync, deflateSync } from 'node:zlib';
import { startNereid, type TestServer } from '../helpers/server.js';

/** One raw HTTP exchange (node:http, so compression and headers are exactly what the test sends and receives). */
function raw(
  url: string,
  opts: { method?: string; headers?: Record<string, string | number>; body?: Uint8Array },
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: opts.method ?? 'GET', headers: opts.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

interface WireOutput {
  name: string;
  datatype: string;
  shape: number[];
  data?: unknown[];
  parameters?: { binary_data_size?: number };
}
interface WireResponse {
  model_name: string;
  model_version: string;
  id?: string;
  outputs: WireOutput[];
}

const range = (n: number, f: (i: number) => number = (i) => i): number[] => Array.from({ length: n }, (_, i) => f(i));
const int32Bytes = (values: number[]): Buffer => Buffer.from(Int32Array.from(values).buffer);

/** Splits a binary response into its JSON header and the blobs of the outputs that carry binary_data_size. */
function splitBinary(
  headers: Record<string, unknown>,
  body: Buffer,
): { json: WireResponse; blobs: Map<string, Buffer> } {
  const n = Number(headers['inference-header-content-length']);
  const json = JSON.parse(body.subarray(0, n).toString('utf8')) as WireResponse;
  const blobs = new Map<string, Buffer>();
  let off = n;
  for (const o of json.outputs) {
    const size = o.parameters?.binary_data_size;
    if (size === undefined) continue;
    blobs.set(o.name, body.subarray(off, off + size));
    off += size;
  }
  assert.equal(off, body.length, 'blobs fill the body exactly');
  return { json, blobs };
}

describe('HTTP infer (real server, simple/classifier models)', () => {
  let server: TestServer;
  let base: string;
  before(async () => {
    server = await startNereid({});
    base = server.url;
  });
  after(() => server.close());

  const simpleJson = (extra: Record<string, unknown> = {}) => ({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: range(16) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: range(16, () => 1) },
    ],
    ...extra,
  });

  it('answers JSON infer on simple with sum and difference, echoing the request id', async () => {
    const r = await fetch(`${base}/v2/models/simple/infer`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(simpleJson({ id: 'req-42' })),
    });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /application\/json/);
    const body = (await r.json()) as WireResponse;
    assert.equal(body.model_name, 'simple');
    assert.equal(body.model_version, '1');
    assert.equal(body.id, 'req-42');
    const out = Object.fromEntries(body.outputs.map((o: WireOutput) => [o.name, o]));
    assert.deepEqual(out.OUTPUT0.shape, [1, 16]);
    assert.equal(out.OUTPUT0.datatype, 'INT32');
    assert.deepEqual(
      out.OUTPUT0.data,
      range(16, (i) => i + 1),
    );
    assert.deepEqual(
      out.OUTPUT1.data,
      range(16, (i) => i - 1),
    );
  });

  it('accepts nested data (row-major) and an explicit version', async () => {
    const req = simpleJson();
    req.inputs[0].data = [[range(8), range(8, (i) => i + 8)]] as unknown as number[];
    const r = await fetch(`${base}/v2/models/simple/versions/1/infer`, { method: 'POST', body: JSON.stringify(req) });
    assert.equal(r.status, 200);
    const body = (await r.json()) as WireResponse;
    assert.deepEqual(
      body.outputs.find((o: WireOutput) => o.name === 'OUTPUT0')?.data,
      range(16, (i) => i + 1),
    );
  });

  it('returns only the requested subset of outputs', async () => {
    const r = await fetch(`${base}/v2/models/simple/infer`, {
      method: 'POST',
      body: JSON.stringify(simpleJson({ outputs: [{ name: 'OUTPUT1' }] })),
    });
    assert.equal(r.status, 200);
    const body = (await r.json()) as WireResponse;
    assert.deepEqual(
      body.outputs.map((o: WireOutput) => o.name),
      ['OUTPUT1'],
    );
  });

  it('takes binary inputs and returns binary outputs (binary_data_output)', async () => {
    const header = Buffer.from(
      JSON.stringify({
        parameters: { binary_data_output: true },
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [2, 16], parameters: { binary_data_size: 128 } },
          { name: 'INPUT1', datatype: 'INT32', shape: [2, 16], parameters: { binary_data_size: 128 } },
        ],
      }),
    );
    const a = range(32, (i) => i * 3);
    const b = range(32, (i) => 100 - i);
    const r = await raw(`${base}/v2/models/simple/infer`, {
      method: 'POST',
      headers: { 'Inference-Header-Content-Length': header.length, 'Content-Type': 'application/octet-stream' },
      body: Buffer.concat([header, int32Bytes(a), int32Bytes(b)]),
    });
    assert.equal(r.status, 200, r.body.toString());
    assert.equal(r.headers['content-type'], 'application/octet-stream');
    const { json, blobs } = splitBinary(r.headers, r.body);
    assert.deepEqual(json.outputs[0].shape, [2, 16]);
    const sum = new Int32Array(new Uint8Array(blobs.get('OUTPUT0') as Buffer).buffer);
    const diff = new Int32Array(new Uint8Array(blobs.get('OUTPUT1') as Buffer).buffer);
    assert.deepEqual(
      Array.from(sum),
      range(32, (i) => a[i] + b[i]),
    );
    assert.deepEqual(
      Array.from(diff),
      range(32, (i) => a[i] - b[i]),
    );
  });

  it('returns one output binary and one as JSON for a JSON request (per-output binary_data)', async () => {
    const r = await raw(`${base}/v2/models/simple/infer`, {
      method: 'POST',
      body: Buffer.from(
        JSON.stringify(
          simpleJson({
            outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1' }],
          }),
        ),
      ),
    });
    assert.equal(r.status, 200, r.body.toString());
    const { json, blobs } = splitBinary(r.headers, r.body);
    assert.equal(json.outputs[0].parameters?.binary_data_size, 64);
    assert.equal(json.outputs[0].data, undefined);
    assert.deepEqual(
      json.outputs[1].data,
      range(16, (i) => i - 1),
    );
    const sum = new Int32Array(new Uint8Array(blobs.get('OUTPUT0') as Buffer).buffer);
    assert.deepEqual(
      Array.from(sum),
      range(16, (i) => i + 1),
    );
  });

  it('decompresses gzip and deflate request bodies', async () => {
    for (const [coding, zip] of [
      ['gzip', gzipSync],
      ['deflate', deflateSync],
    ] as const) {
      const r = await raw(`${base}/v2/models/simple/infer`, {
        method: 'POST',
        headers: { 'Content-Encoding': coding },
        body: zip(Buffer.from(JSON.stringify(simpleJson()))),
      });
      assert.equal(r.status, 200, `${coding}: ${r.body.toString()}`);
      assert.equal((JSON.parse(r.body.toString()) as WireResponse).outputs.length, 2);
    }
  });

  it('compresses a large response with gzip when the client accepts it', async () => {
    const big = (i: number) => 1_000_000 + i * 7919;
    const req = {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [8, 16], data: range(128, big) },
        { name: 'INPUT1', datatype: 'INT32', shape: [8, 16], data: range(128, big) },
      ],
    };
    const r = await raw(`${base}/v2/models/simple/infer`, {
      method: 'POST',
      headers: { 'Accept-Encoding': 'gzip, deflate' },
      body: Buffer.from(JSON.stringify(req)),
    });
    assert.equal(r.status, 200);
    assert.equal(r.headers['content-encoding'], 'gzip');
    const body = JSON.parse(gunzipSync(r.body).toString()) as WireResponse;
    assert.deepEqual(
      body.outputs[0].data,
      range(128, (i) => 2 * big(i)),
    );
  });

  it('answers the classification extension with BYTES "value:index:label" strings', async () => {
    const r = await fetch(`${base}/v2/models/classifier/infer`, {
      method: 'POST',
      body: JSON.stringify({
        inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 8], data: range(8, (i) => i / 8) }],
        outputs: [{ name: 'PROBS', parameters: { classification: 2 } }],
      }),
    });
    assert.equal(r.status, 200);
    const out = ((await r.json()) as WireResponse).outputs[0];
    assert.equal(out.datatype, 'BYTES');
    assert.deepEqual(out.shape, [1, 2]);
    for (const s of out.data as string[]) assert.match(s, /^-?[\d.e+-]+:\d+(:.+)?$/);
  });

  it('serves a raw binary request (Inference-Header-Content-Length: 0) for a single-input model', async () => {
    const r = await raw(`${base}/v2/models/classifier/infer`, {
      method: 'POST',
      headers: { 'Inference-Header-Content-Length': 0 },
      body: Buffer.from(Float32Array.from(range(8)).buffer),
    });
    assert.equal(r.status, 200, r.body.toString());
    const { json, blobs } = splitBinary(r.headers, r.body);
    assert.deepEqual(json.outputs[0].shape, [1, 5]);
    assert.equal(blobs.get('PROBS')?.length, 20);
  });

  it('answers health with empty bodies and metadata/config as JSON', async () => {
    for (const p of [
      '/v2/health/live',
      '/v2/health/ready',
      '/v2/models/simple/ready',
      '/v2/models/simple/versions/1/ready',
    ]) {
      const r = await raw(base + p, {});
      assert.equal(r.status, 200, p);
      assert.equal(r.body.length, 0, p);
    }
    const meta = (await (await fetch(`${base}/v2`)).json()) as { name: unknown; extensions: unknown };
    assert.equal(typeof meta.name, 'string');
    assert.ok(Array.isArray(meta.extensions));
    const model = (await (await fetch(`${base}/v2/models/simple`)).json()) as { inputs: unknown[] };
    assert.deepEqual(model.inputs[0], { name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] });
    const config = (await (await fetch(`${base}/v2/models/simple/versions/1/config`)).json()) as {
      max_batch_size: number;
      input: { data_type: string }[];
    };
    assert.equal(config.max_batch_size, 8);
    assert.equal(config.input[0].data_type, 'TYPE_INT32');
  });

  it('keeps bodyless GET connections alive (regression: they were answered with Connection: close)', async () => {
    const r = await raw(`${base}/v2/health/ready`, { headers: { Connection: 'keep-alive' } });
    assert.equal(r.headers.connection, 'keep-alive');
  });

  it('keeps serving after a client disconnects mid-request', async () => {
    const controller = new AbortController();
    const p = fetch(`${base}/v2/models/simple/infer`, {
      method: 'POST',
      body: JSON.stringify(simpleJson()),
      signal: controller.signal,
    }).catch((e: unknown) => e);
    controller.abort();
    await p;
    const r = await fetch(`${base}/v2/models/simple/infer`, { method: 'POST', body: JSON.stringify(simpleJson()) });
    assert.equal(r.status, 200);
  });
});
