import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * Wrong answers of the HTTP JSON codec that once came back with a 200 (issue 22, items 3, 4, 5 and 11), over the real
 * server with identity models, so what the model saw is what comes back:
 * - a BYTES output that is not UTF-8, asked for as JSON, was sent with U+FFFD in place of its bytes;
 * - `/generate` wrapped or truncated numbers for integer inputs (2^40 into INT32, 1.9) where `/infer` refuses them;
 * - a raw binary body for a BYTES input with dims [-1] was accepted (Triton requires shape [1]);
 * - a `shape` nested 10^5 deep answered 500.
 */

const model = (name: string, dt: string, dims: string): string => `name: "${name}"
backend: "identity"
max_batch_size: 0
input [{ name: "INPUT0" data_type: ${dt} dims: ${dims} }]
output [{ name: "OUTPUT0" data_type: ${dt} dims: ${dims} }]
`;

const MODELS: Record<string, string> = {
  bytes_var: model('bytes_var', 'TYPE_STRING', '[ -1 ]'),
  bytes_one: model('bytes_one', 'TYPE_STRING', '[ 1 ]'),
  ints: model('ints', 'TYPE_INT32', '[ -1 ]'),
  bytes8: model('bytes8', 'TYPE_UINT8', '[ -1 ]'),
};

/** A 4-byte little-endian length, then the bytes: the binary form of one BYTES element. */
function element(bytes: Uint8Array): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32LE(bytes.byteLength, 0);
  return Buffer.concat([len, bytes]);
}

interface Reply {
  status: number;
  text: string;
  headers: Headers;
  body: Buffer;
}

describe('HTTP JSON codec: no wrong 200 (real server, identity models)', () => {
  let repo: string;
  let n: TestServer;
  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-json-codec-'));
    for (const [name, config] of Object.entries(MODELS)) {
      await mkdir(join(repo, name, '1'), { recursive: true });
      await writeFile(join(repo, name, 'config.pbtxt'), config);
    }
    n = await startNereid({ repositories: [repo], allowGrpc: false });
  });
  after(async () => {
    await n?.close();
    await rm(repo, { recursive: true, force: true });
  });

  const post = async (
    path: string,
    body: Uint8Array | string,
    headers: Record<string, string> = {},
  ): Promise<Reply> => {
    const res = await fetch(`${n.url}${path}`, { method: 'POST', body, headers });
    const buf = Buffer.from(await res.arrayBuffer());
    return { status: res.status, text: buf.toString('latin1'), headers: res.headers, body: buf };
  };
  const errorOf = (r: Reply): string => (JSON.parse(r.body.toString('utf8')) as { error: string }).error;

  /** Sends the elements as a binary input of bytes_var and asks for OUTPUT0 as JSON or binary. */
  const echoBytes = (elements: Uint8Array[], binaryOut: boolean): Promise<Reply> => {
    const blob = Buffer.concat(elements.map(element));
    const header = Buffer.from(
      JSON.stringify({
        inputs: [
          {
            name: 'INPUT0',
            datatype: 'BYTES',
            shape: [elements.length],
            parameters: { binary_data_size: blob.length },
          },
        ],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: binaryOut } }],
      }),
    );
    return post('/v2/models/bytes_var/infer', Buffer.concat([header, blob]), {
      'Inference-Header-Content-Length': String(header.length),
    });
  };

  // Item 3.
  it('BAD CALL - a BYTES output that is not UTF-8 asked for as JSON is refused (400), never sent with U+FFFD', async () => {
    const r = await echoBytes([Buffer.from('ok'), Buffer.from([0x61, 0xff, 0xfe, 0x62])], false);
    assert.equal(r.status, 400, r.text);
    assert.match(errorOf(r), /output 'OUTPUT0'.*element 1 .*not valid UTF-8.*binary_data/);
  });

  it('the same non-UTF-8 output asked for as binary comes back byte for byte', async () => {
    const bad = Buffer.from([0x61, 0xff, 0xfe, 0x62]);
    const r = await echoBytes([Buffer.from('ok'), bad], true);
    assert.equal(r.status, 200, r.text);
    const at = Number(r.headers.get('inference-header-content-length'));
    assert.deepEqual(r.body.subarray(at), Buffer.concat([element(Buffer.from('ok')), element(bad)]));
  });

  it('valid UTF-8 (a leading byte-order mark included) comes back as JSON text unchanged', async () => {
    const texts = ['\uFEFFbom first', 'héllo ✓ 𝄞', ''];
    const r = await echoBytes(
      texts.map((t) => Buffer.from(t, 'utf8')),
      false,
    );
    assert.equal(r.status, 200, r.text);
    const out = (JSON.parse(r.body.toString('utf8')) as { outputs: { data: string[] }[] }).outputs[0];
    assert.deepEqual(out.data, texts);
  });

  it('/generate answers a BYTES output as its text (the strict decoder passes valid UTF-8 through)', async () => {
    // /generate's BYTES inputs are JSON strings, always UTF-8, so an identity model cannot echo invalid bytes here;
    // the refusal of invalid ones is the shared decoder's (json-tensor.test.ts).
    const r = await post('/v2/models/bytes_one/generate', JSON.stringify({ INPUT0: 'fine ✓' }));
    assert.equal(r.status, 200, r.text);
    assert.equal((JSON.parse(r.body.toString('utf8')) as { OUTPUT0: string }).OUTPUT0, 'fine ✓');
  });

  // Item 4.
  it("BAD CALL - /generate refuses out-of-range and fractional integers with /infer's 400 and message", async () => {
    for (const [value, what] of [
      [2 ** 40, /value 1099511627776 is out of range for INT32/],
      [1.9, /expected an integer, got 1.9/],
      [-(2 ** 31) - 1, /value -2147483649 is out of range for INT32/],
    ] as const) {
      const gen = await post('/v2/models/ints/generate', JSON.stringify({ INPUT0: [1, value] }));
      assert.equal(gen.status, 400, gen.text);
      const inf = await post(
        '/v2/models/ints/infer',
        JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [2], data: [1, value] }] }),
      );
      assert.equal(inf.status, 400, inf.text);
      assert.match(errorOf(gen), what);
      assert.equal(errorOf(gen), errorOf(inf));
    }
    const u8 = await post('/v2/models/bytes8/generate', JSON.stringify({ INPUT0: 256 }));
    assert.equal(u8.status, 400, u8.text);
    assert.match(errorOf(u8), /value 256 is out of range for UINT8/);
    const str = await post('/v2/models/ints/generate', JSON.stringify({ INPUT0: ['7'] }));
    assert.equal(str.status, 400, str.text);
    assert.match(errorOf(str), /input 'INPUT0': expected a number, got string/);
  });

  it('/generate still converts in-range integers exactly, and a nested array row-major', async () => {
    const r = await post('/v2/models/ints/generate', JSON.stringify({ INPUT0: [[2147483647, -2147483648], [0]] }));
    assert.equal(r.status, 200, r.text);
    assert.deepEqual((JSON.parse(r.text) as { OUTPUT0: number[] }).OUTPUT0, [2147483647, -2147483648, 0]);
  });

  it('BAD CALL - /generate refuses an input nested past the JSON depth limit with 400, not 500', async () => {
    const deep = '['.repeat(100_000) + '1' + ']'.repeat(100_000);
    const r = await post('/v2/models/ints/generate', `{"INPUT0":${deep}}`);
    assert.equal(r.status, 400, r.text.slice(0, 300));
    assert.match(errorOf(r), /JSON nesting depth exceeds maximum allowed limit \(100\)/);
  });

  // Item 5.
  it("BAD CALL - a raw binary body for a BYTES input with dims [-1] is 400 with Triton's message", async () => {
    const r = await post('/v2/models/bytes_var/infer', Buffer.from('abc'), { 'Inference-Header-Content-Length': '0' });
    assert.equal(r.status, 400, r.text);
    assert.equal(errorOf(r), "For BYTE datatype raw input 'INPUT0', the model must have input shape [1]");
  });

  it('a raw binary body for a BYTES input with dims [1] is the one element, byte for byte', async () => {
    const bytes = Buffer.from([0x00, 0xff, 0x41]);
    const r = await post('/v2/models/bytes_one/infer', bytes, { 'Inference-Header-Content-Length': '0' });
    assert.equal(r.status, 200, r.text);
    const at = Number(r.headers.get('inference-header-content-length'));
    assert.deepEqual(r.body.subarray(at), element(bytes));
  });

  // Item 11.
  it('BAD CALL - a shape nested 10^5 levels deep is 400, not 500', async () => {
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    const r = await post(
      '/v2/models/ints/infer',
      `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[${deep}],"data":[1]}]}`,
    );
    assert.equal(r.status, 400, r.text.slice(0, 300));
    assert.match(
      errorOf(r),
      /Unable to parse 'shape' of input 'INPUT0': dims must be non-negative integers, got array/,
    );
    const ok = await post(
      '/v2/models/ints/infer',
      JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [1] }] }),
    );
    assert.equal(ok.status, 200, ok.text);
  });
});
