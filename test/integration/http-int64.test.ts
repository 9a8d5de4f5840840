import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { NereidHttpClient } from '../../src/client/index.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * INT64 and UINT64 in KServe JSON, exact both ways up to 2^63-1 and 2^64-1: JSON.parse reads numbers as doubles
 * (2^53+1 becomes 2^53), so the server parses integer literals beyond 2^53 from their source text (Node >= 21's
 * reviver `context.source`) and prints 64-bit integers from their digits. An identity model echoes the values, so
 * what comes back is what the model saw.
 */

const CONFIG = `name: "wide"
backend: "identity"
max_batch_size: 0
input [{ name: "INPUT0" data_type: TYPE_INT64 dims: [ -1 ] }, { name: "INPUT1" data_type: TYPE_UINT64 dims: [ -1 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT64 dims: [ -1 ] }, { name: "OUTPUT1" data_type: TYPE_UINT64 dims: [ -1 ] }]
`;

const INT64 = ['9223372036854775807', '-9223372036854775808', '9007199254740993', '-9007199254740993', '1'];
const UINT64 = ['18446744073709551615', '9223372036854775808', '9007199254740993', '0'];

const request = (int64: string[], uint64: string[], extra = ''): string =>
  `{"inputs":[{"name":"INPUT0","datatype":"INT64","shape":[${int64.length}],"data":[${int64.join(',')}]},` +
  `{"name":"INPUT1","datatype":"UINT64","shape":[${uint64.length}],"data":[${uint64.join(',')}]}]${extra}}`;

describe('INT64/UINT64 in JSON (real server, identity model)', () => {
  let repo: string;
  let n: TestServer;
  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-int64-'));
    await mkdir(join(repo, 'wide', '1'), { recursive: true });
    await writeFile(join(repo, 'wide', 'config.pbtxt'), CONFIG);
    n = await startNereid({ repositories: [repo], allowGrpc: false });
  });
  after(async () => {
    await n?.close();
    await rm(repo, { recursive: true, force: true });
  });

  const post = async (body: string): Promise<{ status: number; text: string; headers: Headers }> => {
    const res = await fetch(`${n.url}/v2/models/wide/infer`, { method: 'POST', body });
    return { status: res.status, text: await res.text(), headers: res.headers };
  };

  it('keeps every digit from the request JSON to the model and back to the response JSON', async () => {
    const r = await post(request(INT64, UINT64));
    assert.equal(r.status, 200, r.text);
    assert.ok(r.text.includes(`"data":[${INT64.join(',')}]`), r.text);
    assert.ok(r.text.includes(`"data":[${UINT64.join(',')}]`), r.text);
  });

  it('the model sees the exact values: binary outputs carry the same 64-bit integers', async () => {
    const res = await fetch(`${n.url}/v2/models/wide/infer`, {
      method: 'POST',
      body: request(INT64, UINT64, ',"parameters":{"binary_data_output":true}'),
    });
    assert.equal(res.status, 200);
    const body = new Uint8Array(await res.arrayBuffer());
    const at = Number(res.headers.get('inference-header-content-length'));
    const blob = (from: number, n: number): ArrayBuffer => body.slice(at + from * 8, at + (from + n) * 8).buffer;
    assert.deepEqual([...new BigInt64Array(blob(0, INT64.length))], INT64.map(BigInt));
    assert.deepEqual([...new BigUint64Array(blob(INT64.length, UINT64.length))], UINT64.map(BigInt));
  });

  it('BAD CALL - refuses integers one past either end of the range with 400', async () => {
    for (const [int64, uint64, what] of [
      [['9223372036854775808'], ['0'], /value 9223372036854775808 is out of range for INT64/],
      [['-9223372036854775809'], ['0'], /value -9223372036854775809 is out of range for INT64/],
      [['0'], ['18446744073709551616'], /value 18446744073709551616 is out of range for UINT64/],
      [['0'], ['-1'], /value -1 is out of range for UINT64/],
    ] as const) {
      const r = await post(request([...int64], [...uint64]));
      assert.equal(r.status, 400, r.text);
      assert.match(JSON.parse(r.text).error, what);
    }
  });

  it('the TypeScript client reads JSON outputs exactly too', async () => {
    const client = new NereidHttpClient({ url: n.url });
    const result = await client.infer(
      'wide',
      [
        { name: 'INPUT0', datatype: 'INT64', shape: [INT64.length], data: BigInt64Array.from(INT64.map(BigInt)) },
        { name: 'INPUT1', datatype: 'UINT64', shape: [UINT64.length], data: BigUint64Array.from(UINT64.map(BigInt)) },
      ],
      { binary: false },
    );
    assert.deepEqual([...(result.output('OUTPUT0').data as BigInt64Array)], INT64.map(BigInt));
    assert.deepEqual([...(result.output('OUTPUT1').data as BigUint64Array)], UINT64.map(BigInt));
  });
});
