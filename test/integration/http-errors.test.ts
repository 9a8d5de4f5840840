import assert from 'node:assert/strict';
import { request } from 'node:http';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { startNereid, type TestServer } from '../helpers/server.js';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/**
 * One raw HTTP exchange. `chunks` sends the body with chunked transfer encoding, one HTTP chunk per element.
 * A server that answers early and closes the connection may reset the upload: the reply still counts if it arrived.
 */
function raw(
  url: string,
  opts: { method?: string; headers?: Record<string, string | number>; body?: Uint8Array; chunks?: Uint8Array[] },
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: opts.method ?? 'POST', headers: opts.headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }));
      res.on('error', reject);
    });
    req.on('error', (err) => reject(err));
    if (opts.chunks !== undefined) {
      for (const c of opts.chunks) req.write(c);
      req.end();
    } else {
      req.end(opts.body);
    }
  });
}

const range = (n: number, f: (i: number) => number = (i) => i): number[] => Array.from({ length: n }, (_, i) => f(i));

const LIMIT = 256 * 1024;

describe('HTTP bad input (real server, --http-max-input-size 256 KiB)', () => {
  let server: TestServer;
  let base: string;
  before(async () => {
    server = await startNereid({ httpMaxInputSize: LIMIT });
    base = server.url;
  });
  after(() => server.close());

  const good = () => ({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: range(16) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: range(16) },
    ],
  });

  /** POSTs `body` (an object is sent as JSON) and checks the status and the `{"error"}` message. */
  async function expectError(
    path: string,
    body: unknown,
    status: number,
    message: RegExp,
    headers: Record<string, string | number> = {},
  ): Promise<Reply> {
    const bytes =
      body instanceof Uint8Array ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    const r = await raw(base + path, { body: bytes, headers });
    assert.equal(r.status, status, r.body.toString());
    const err = (JSON.parse(r.body.toString()) as { error: string }).error;
    assert.match(err, message);
    return r;
  }

  const infer = '/v2/models/simple/infer';

  it('BAD CALL - unknown model and unknown version are 404, and an unknown model wins over malformed JSON', async () => {
    await expectError('/v2/models/nope/infer', good(), 404, /unknown model: 'nope'/);
    await expectError('/v2/models/simple/versions/99/infer', good(), 404, /version 99 is not found/);
    await expectError('/v2/models/nope/infer', '{not json', 404, /unknown model/);
  });

  it('BAD CALL - malformed JSON and missing or mistyped fields are 400', async () => {
    await expectError(infer, '{not json', 400, /failed to parse the request JSON buffer/);
    await expectError(infer, '[1,2]', 400, /failed to parse the request JSON buffer: expected an object/);
    await expectError(infer, {}, 400, /Unable to parse 'inputs': missing/);
    await expectError(infer, { inputs: [{ datatype: 'INT32', shape: [1] }] }, 400, /Unable to parse 'name'/);
    await expectError(
      infer,
      { inputs: [{ name: 'INPUT0', shape: [1, 16], data: [] }] },
      400,
      /'datatype' of input 'INPUT0'/,
    );
    await expectError(
      infer,
      { inputs: [{ name: 'INPUT0', datatype: 'INT32', data: [] }] },
      400,
      /'shape' of input 'INPUT0': missing/,
    );
    await expectError(
      infer,
      { inputs: [{ name: 'INPUT0', datatype: 'INT33', shape: [1], data: [1] }] },
      400,
      /unknown datatype 'INT33'/,
    );
    await expectError(
      infer,
      { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [-1, 16], data: [] }] },
      400,
      /non-negative integers/,
    );
    await expectError(infer, { id: 5, inputs: [] }, 400, /Unable to parse 'id'/);
    await expectError(
      infer,
      { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }] },
      400,
      /Input must set only one of the following fields: .* But no field is set/,
    );
  });

  it('BAD CALL - data that does not fit the shape, has the wrong type or nests too deep is 400', async () => {
    const req = good();
    req.inputs[0].data = range(15);
    await expectError(
      infer,
      req,
      400,
      /unable to parse 'data' for input 'INPUT0': shape \[1,16\] needs 16 elements, got 15/,
    );
    const wrong = good() as { inputs: { data: unknown[] }[] };
    wrong.inputs[1].data = range(16).map(String);
    await expectError(infer, wrong, 400, /input 'INPUT1': expected a number, got string/);
    let deep: unknown = range(16);
    for (let i = 0; i < 101; i++) deep = [deep];
    const nested = good() as { inputs: { data: unknown }[] };
    nested.inputs[0].data = deep;
    await expectError(infer, nested, 400, /JSON nesting depth exceeds maximum allowed limit \(100\)/);
  });

  it('BAD CALL - duplicate outputs and triton_ parameters are 400', async () => {
    await expectError(
      infer,
      { ...good(), outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT0' }] },
      400,
      /output 'OUTPUT0' already exists in request/,
    );
    await expectError(
      infer,
      { ...good(), parameters: { triton_enable_x: true } },
      400,
      /starting with 'triton_' are reserved/,
    );
  });

  const binaryHeader = (sizes: [number, number]) =>
    Buffer.from(
      JSON.stringify({
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: sizes[0] } },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: sizes[1] } },
        ],
      }),
    );

  it('BAD CALL - a bad Inference-Header-Content-Length is 400 with Triton wording', async () => {
    const h = binaryHeader([64, 64]);
    const body = Buffer.concat([h, Buffer.alloc(128)]);
    await expectError(infer, body, 400, /Unable to parse Inference-Header-Content-Length, got: abc/, {
      'Inference-Header-Content-Length': 'abc',
    });
    await expectError(infer, body, 400, /inference header size should be in range/, {
      'Inference-Header-Content-Length': -5,
    });
    await expectError(infer, body, 400, /inference header size should be in range/, {
      'Inference-Header-Content-Length': body.length + 1,
    });
    await expectError(infer, body, 400, /out of range \[ -2147483648, 2147483647 \]/, {
      'Inference-Header-Content-Length': 2 ** 40,
    });
  });

  it('BAD CALL - blobs past the end, leftover bytes, and binary without the header are 400', async () => {
    const h = binaryHeader([64, 64]);
    await expectError(
      infer,
      Buffer.concat([h, Buffer.alloc(100)]),
      400,
      /unexpected size for input 'INPUT1', expecting 64 additional bytes/,
      {
        'Inference-Header-Content-Length': h.length,
      },
    );
    await expectError(infer, Buffer.concat([h, Buffer.alloc(130)]), 400, /unexpected additional input data/, {
      'Inference-Header-Content-Length': h.length,
    });
    await expectError(infer, h, 400, /must specify valid 'Inference-Header-Content-Length'/);
    const both = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [1], parameters: { binary_data_size: 4 } }],
      }),
    );
    await expectError(
      infer,
      Buffer.concat([both, Buffer.alloc(4)]),
      400,
      /Input must set only one of the following fields: .* But set 'data' 'binary_data_size'/,
      {
        'Inference-Header-Content-Length': both.length,
      },
    );
  });

  it('BAD CALL - a BYTES element whose length prefix runs past the data is 400', async () => {
    const h = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [1, 1], parameters: { binary_data_size: 8 } }],
      }),
    );
    const blob = Buffer.alloc(8);
    blob.writeUInt32LE(100, 0);
    await expectError(infer, Buffer.concat([h, blob]), 400, /input 'TEXT': string element 0 has length 100/, {
      'Inference-Header-Content-Length': h.length,
    });
  });

  it('BAD CALL - a body over --http-max-input-size is refused before it is read, and the server keeps serving', async () => {
    const big = Buffer.alloc(LIMIT + 1, 0x20);
    const r = await raw(base + infer, { body: big }).catch((e: unknown) =>
      e instanceof Error ? e : new Error(String(e)),
    );
    if (!(r instanceof Error)) {
      assert.equal(r.status, 400);
      assert.match(
        r.body.toString(),
        /request JSON size of 262145 bytes exceeds the maximum allowed input size of 262144 bytes. Use --http-max-input-size/,
      );
    }
    const ok = await fetch(base + infer, { method: 'POST', body: JSON.stringify(good()) });
    assert.equal(ok.status, 200);
  });

  it('BAD CALL - a chunked body over the limit is 400', async () => {
    const chunks = range(5).map(() => Buffer.alloc(64 * 1024, 0x20));
    const r = await raw(base + infer, { chunks }).catch((e: unknown) =>
      e instanceof Error ? e : new Error(String(e)),
    );
    if (!(r instanceof Error)) {
      assert.equal(r.status, 400);
      assert.match(r.body.toString(), /exceeds the maximum allowed input size of 262144 bytes/);
    }
  });

  it('BAD CALL - a gzip bomb is stopped at the limit (the limit applies after decompression)', async () => {
    const bomb = gzipSync(Buffer.alloc(16 * 1024 * 1024, 0x20));
    assert.ok(bomb.length < LIMIT);
    await expectError(infer, bomb, 400, /^Decompressed data size exceeds the maximum allowed value of 262144 bytes/, {
      'Content-Encoding': 'gzip',
    });
    await expectError(infer, Buffer.from('not gzip'), 400, /failed to decompress/, { 'Content-Encoding': 'gzip' });
  });

  it('BAD CALL - an unsupported Content-Encoding is 501 and advertises what is accepted', async () => {
    const r = await expectError(infer, good(), 501, /Unsupported compression type/, { 'Content-Encoding': 'br' });
    assert.equal(r.headers['accept-encoding'], 'gzip, deflate');
  });

  it('BAD CALL - unknown routes are 404, wrong methods 405, a non-numeric version 404', async () => {
    for (const p of ['/v3', '/v2/models', '/v2/models/simple/versions/abc/infer', '/v2/models/simple/infer/x']) {
      const r = await raw(base + p, { method: 'GET' });
      assert.equal(r.status, 404, p);
      assert.deepEqual(JSON.parse(r.body.toString()), { error: 'Not Found' });
    }
    assert.equal((await raw(base + infer, { method: 'GET' })).status, 405);
    assert.equal((await raw(`${base}/v2/health/live`, { method: 'POST' })).status, 405);
    assert.equal((await raw(`${base}/v2/models/simple`, { method: 'DELETE' })).status, 405);
  });

  it('BAD CALL - model ready on an unknown model is 400 "Model version not ready"; metadata is 404', async () => {
    const r = await raw(`${base}/v2/models/nope/ready`, { method: 'GET' });
    assert.equal(r.status, 400);
    assert.deepEqual(JSON.parse(r.body.toString()), { error: 'Model version not ready' });
    assert.equal((await raw(`${base}/v2/models/nope`, { method: 'GET' })).status, 404);
    assert.equal((await raw(`${base}/v2/models/nope/config`, { method: 'GET' })).status, 404);
  });

  it('answers 501 (not a fake success) on extensions that are not implemented yet or are off', async () => {
    for (const [method, p, message] of [
      // Client shared memory is off unless --allow-client-shm (Triton's default and wording).
      ['POST', '/v2/systemsharedmemory/region/r/register', /Client shared memory is disabled/],
      ['POST', '/v2/cudasharedmemory/region/r/register', /Client shared memory is disabled/],
    ] as const) {
      const r = await raw(base + p, { method });
      assert.equal(r.status, 501, p);
      assert.match((JSON.parse(r.body.toString()) as { error: string }).error, message);
    }
  });

  it('reports no shared-memory regions (status 200 []), and 404 for a named one', async () => {
    for (const kind of ['system', 'cuda']) {
      const all = await raw(`${base}/v2/${kind}sharedmemory/status`, { method: 'GET' });
      assert.equal(all.status, 200);
      assert.deepEqual(JSON.parse(all.body.toString()), []);
      const one = await raw(`${base}/v2/${kind}sharedmemory/region/r1/status`, { method: 'GET' });
      assert.equal(one.status, 404);
    }
  });

  it('BAD CALL - too many non-empty chunks is 400', async () => {
    const chunks = range(65537).map(() => Buffer.from(' '));
    const r = await raw(base + infer, { chunks }).catch((e: unknown) =>
      e instanceof Error ? e : new Error(String(e)),
    );
    if (!(r instanceof Error)) {
      assert.equal(r.status, 400);
      assert.match(r.body.toString(), /exceeds maximum of 65536 non-empty chunks/);
    }
  });

  it('REGRESSION Transfer-Encoding with Content-Length - a 400 that says why, then the connection closes', async () => {
    // What Python's requests sends when a caller sets Content-Length and frames the chunks itself. Node's parser
    // answered an empty 400; RFC 9112 §6.1 lets a server refuse it, and requires closing the connection.
    const json = JSON.stringify(good());
    const chunked = `${json.length.toString(16)}\r\n${json}\r\n0\r\n\r\n`;
    const reply = await new Promise<string>((resolve, reject) => {
      const sock = connect(server.httpPort as number, '127.0.0.1');
      let text = '';
      sock.on('data', (d: Buffer) => (text += d.toString('utf8')));
      sock.on('error', reject);
      // Resolves only when the server closes its side: the test would time out on a kept-alive connection.
      sock.on('close', () => resolve(text));
      sock.write(
        `POST ${infer} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${json.length}\r\nTransfer-Encoding: chunked\r\n\r\n${chunked}`,
      );
    });
    assert.match(reply, /^HTTP\/1\.1 400 /);
    assert.match(reply, /\r\nConnection: close\r\n/i);
    const body = JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4)) as { error: string };
    assert.match(body.error, /both Transfer-Encoding and Content-Length/);
    // Node's other parse errors keep Node's answers.
    const garbage = await new Promise<string>((resolve) => {
      const sock = connect(server.httpPort as number, '127.0.0.1');
      let text = '';
      sock.on('data', (d: Buffer) => (text += d.toString('latin1')));
      sock.on('error', () => undefined);
      sock.on('close', () => resolve(text));
      sock.write('GARBAGE\r\n\r\n');
    });
    assert.equal(garbage, 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
  });
});
