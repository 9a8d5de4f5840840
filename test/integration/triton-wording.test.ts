/**
 * Codes and messages that Triton's sources pin (issue 22 item 16; docs/errors.md lists every error). Each case
 * asserts Triton's exact wording over HTTP and gRPC where both apply; where Nereid differs on purpose the test
 * says so.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { deflateSync, gzipSync } from 'node:zlib';
import type * as grpc from '@grpc/grpc-js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

const INVALID_ARGUMENT = 3;
const NOT_FOUND = 5;
const UNAVAILABLE = 14;
const INTERNAL = 13;

const post = (url: string, body?: Uint8Array | string, headers: Record<string, string> = {}): Promise<Response> =>
  fetch(url, { method: 'POST', body, headers });

async function httpError(res: Response): Promise<{ status: number; error: string }> {
  return { status: res.status, error: ((await res.json()) as { error: string }).error };
}

async function grpcError(p: Promise<unknown>): Promise<{ code: number; details: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as grpc.ServiceError;
    return { code: e.code, details: e.details };
  }
  assert.fail('the call succeeded');
}

const CONTROL_REFUSED = 'explicit model load / unload is not allowed if polling is enabled';

describe('Triton wording: model control, shared memory, versions, size limits, dims (one server, mode none)', () => {
  let s: TestServer;
  let client: grpc.Client;
  const call = (method: string, req: object): Promise<unknown> => callUnary(client, method, req);
  before(async () => {
    s = await startNereid({ allowClientShm: true, httpMaxInputSize: 1024 });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client.close();
    await s.close();
  });

  it('BAD CALL - load and unload in mode none are UNAVAILABLE with Triton words', async () => {
    for (const action of ['load', 'unload']) {
      const res = await post(`${s.url}/v2/repository/models/simple/${action}`);
      assert.deepEqual(await httpError(res), { status: 503, error: CONTROL_REFUSED });
    }
    assert.deepEqual(await grpcError(call('RepositoryModelLoad', { model_name: 'simple' })), {
      code: UNAVAILABLE,
      details: CONTROL_REFUSED,
    });
    assert.deepEqual(await grpcError(call('RepositoryModelUnload', { model_name: 'simple' })), {
      code: UNAVAILABLE,
      details: CONTROL_REFUSED,
    });
  });

  it('BAD CALL - registering a shm key that cannot be opened is INTERNAL (Triton)', async () => {
    const key = `/nereid-audit-${process.pid}-missing`;
    const res = await post(
      `${s.url}/v2/systemsharedmemory/region/r/register`,
      JSON.stringify({ key, offset: 0, byte_size: 4 }),
    );
    const want = `Unable to open shared memory region: '${key}'`;
    assert.deepEqual(await httpError(res), { status: 500, error: want });
    assert.deepEqual(await grpcError(call('SystemSharedMemoryRegister', { name: 'r', key, byte_size: 4 })), {
      code: INTERNAL,
      details: want,
    });
    // A key naming a path below /dev/shm: shm_open refuses it too (INTERNAL, same words; the path is shortened).
    const path = await grpcError(call('SystemSharedMemoryRegister', { name: 'r', key: '/a/b', byte_size: 4 }));
    assert.equal(path.code, INTERNAL);
    assert.match(path.details, /^Unable to open shared memory region: '/);
  });

  const stol = (v: string): string =>
    `failed to get model version from specified version string '${v}' (details: stol), version should be an integral value > 0`;
  const negative = (v: string): string =>
    `invalid model version specified '${v}' , version should be an integral value > 0`;

  it('BAD CALL - a version string that is not an integer is INVALID_ARG with Triton words (gRPC)', async () => {
    // '1.5': Triton's std::stol reads the leading 1 and serves version 1; Nereid refuses rather than guess.
    for (const v of ['abc', '1.5', '99999999999999999999']) {
      for (const method of ['ModelMetadata', 'ModelConfig', 'ModelReady', 'ModelStatistics']) {
        assert.deepEqual(
          await grpcError(call(method, { name: 'simple', version: v })),
          { code: INVALID_ARGUMENT, details: stol(v) },
          `${method} '${v}'`,
        );
      }
    }
    assert.deepEqual(await grpcError(call('ModelMetadata', { name: 'simple', version: '-1' })), {
      code: INVALID_ARGUMENT,
      details: negative('-1'),
    });
    const infer = call('ModelInfer', { model_name: 'simple', model_version: '-1', inputs: [] });
    assert.deepEqual(await grpcError(infer), { code: INVALID_ARGUMENT, details: negative('-1') });
  });

  it('BAD CALL - over HTTP a version out of int64 range is a 400; a non-numeric one does not route (404)', async () => {
    const v = '99999999999999999999';
    for (const path of ['', '/ready', '/config', '/stats']) {
      const res = await fetch(`${s.url}/v2/models/simple/versions/${v}${path}`);
      assert.deepEqual(await httpError(res), { status: 400, error: stol(v) }, path);
    }
    for (const bad of ['abc', '-1', '1.5']) {
      const res = await fetch(`${s.url}/v2/models/simple/versions/${bad}`);
      assert.deepEqual(await httpError(res), { status: 404, error: 'Not Found' });
    }
  });

  const big = JSON.stringify({
    inputs: [{ name: 'INPUT', shape: [8], datatype: 'FP32', data: Array(300).fill(1.25) }],
  });

  it('BAD CALL - a JSON body over --http-max-input-size: Triton words with the size', async () => {
    const res = await post(`${s.url}/v2/models/classifier/infer`, big);
    assert.deepEqual(await httpError(res), {
      status: 400,
      error: `request JSON size of ${big.length} bytes exceeds the maximum allowed input size of 1024 bytes. Use --http-max-input-size to increase the limit.`,
    });
  });

  it('BAD CALL - a raw binary body over the limit says "Raw input" (Triton)', async () => {
    const res = await post(`${s.url}/v2/models/classifier/infer`, new Uint8Array(2000), {
      'inference-header-content-length': '0',
    });
    assert.deepEqual(await httpError(res), {
      status: 400,
      error:
        'Raw input has a byte_size (2000 bytes) that exceeds the maximum allowed value of 1024 bytes. Use --http-max-input-size to increase the limit.',
    });
  });

  it('BAD CALL - a compressed body over the limit once decompressed: Triton words, no size', async () => {
    const want = {
      status: 400,
      error:
        'Decompressed data size exceeds the maximum allowed value of 1024 bytes. Use --http-max-input-size to increase the limit.',
    };
    const gz = await post(`${s.url}/v2/models/classifier/infer`, gzipSync(big), { 'content-encoding': 'gzip' });
    assert.deepEqual(await httpError(gz), want);
    const df = await post(`${s.url}/v2/models/classifier/infer`, deflateSync(big), { 'content-encoding': 'deflate' });
    assert.deepEqual(await httpError(df), want);
    // Compressed bytes already over the limit: the same answer (decompressed, they would be more).
    const noise = gzipSync(randomBytes(4000));
    assert.ok(noise.length > 1024);
    const over = await post(`${s.url}/v2/models/classifier/infer`, noise, { 'content-encoding': 'gzip' });
    assert.deepEqual(await httpError(over), want);
  });

  /** A JSON body with a literal shape (dims past 2^53 must stay exact in the text). */
  const withShape = (shape: string): string =>
    `{"inputs":[{"name":"INPUT0","shape":${shape},"datatype":"INT32","data":[1]},` +
    `{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1]}]}`;
  const grpcWithShape = (shape: string[]): Promise<unknown> =>
    call('ModelInfer', {
      model_name: 'simple',
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape, contents: { int_contents: [1] } }],
    });
  const INT64_MAX = '9223372036854775807';

  it('BAD CALL - dims whose element count passes int64: Triton words (HTTP and gRPC)', async () => {
    // Triton's own L0_http test_buffer_size_overflow payloads.
    const shape = ['16', '1152921504606846978'];
    const want = `invalid shape for input 'INPUT0': shape [16,1152921504606846978] causes total element count to exceed maximum size of ${INT64_MAX}`;
    const res = await post(`${s.url}/v2/models/simple/infer`, withShape(`[${shape.join(',')}]`));
    assert.deepEqual(await httpError(res), { status: 400, error: want });
    assert.deepEqual(await grpcError(grpcWithShape(shape)), { code: INVALID_ARGUMENT, details: want });
  });

  it('BAD CALL - dims whose byte size passes int64: Triton words (HTTP and gRPC)', async () => {
    const shape = ['4', '1152921504606846978'];
    const want = `byte size overflow for input 'INPUT0': element count (4611686018427387912) * data type size (4) exceeds maximum allowed size (${INT64_MAX})`;
    const res = await post(`${s.url}/v2/models/simple/infer`, withShape(`[${shape.join(',')}]`));
    assert.deepEqual(await httpError(res), { status: 400, error: want });
    assert.deepEqual(await grpcError(grpcWithShape(shape)), { code: INVALID_ARGUMENT, details: want });
  });

  it('BAD CALL - a dim past 2^53 that fits int64 says the count passes what Nereid can hold', async () => {
    const shape = ['1', '9007199254740993'];
    const want = `invalid shape for input 'INPUT0': shape [1,9007199254740993] causes total element count to exceed maximum size of 9007199254740991`;
    const res = await post(`${s.url}/v2/models/simple/infer`, withShape(`[${shape.join(',')}]`));
    assert.deepEqual(await httpError(res), { status: 400, error: want });
    assert.deepEqual(await grpcError(grpcWithShape(shape)), { code: INVALID_ARGUMENT, details: want });
  });
});

describe('Triton wording: model control in poll mode', () => {
  it('BAD CALL - load and unload while polling are UNAVAILABLE with Triton words', async () => {
    const s = await startNereid({ modelControlMode: 'poll', repositoryPollSecs: 3600 });
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const res = await post(`${s.url}/v2/repository/models/simple/unload`);
      assert.deepEqual(await httpError(res), { status: 503, error: CONTROL_REFUSED });
      assert.deepEqual(await grpcError(callUnary(client, 'RepositoryModelLoad', { model_name: 'simple' })), {
        code: UNAVAILABLE,
        details: CONTROL_REFUSED,
      });
    } finally {
      client.close();
      await s.close();
    }
  });
});

describe('Triton wording: model names (explicit mode)', () => {
  let s: TestServer;
  let client: grpc.Client;
  before(async () => {
    s = await startNereid({ modelControlMode: 'explicit' });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client.close();
    await s.close();
  });

  it("BAD CALL - load checks the name as Triton does ('..' or a '/')", async () => {
    for (const name of ['..', '../etc', ' a/b ']) {
      assert.deepEqual(await grpcError(callUnary(client, 'RepositoryModelLoad', { model_name: name })), {
        code: INVALID_ARGUMENT,
        details: `invalid model name '${name}', model name must not contain path traversal characters`,
      });
    }
    const res = await post(`${s.url}/v2/repository/models/..%2Fetc/load`);
    assert.deepEqual(await httpError(res), {
      status: 400,
      error: "invalid model name '../etc', model name must not contain path traversal characters",
    });
    // 'a..b' is a plain name to Triton: it is looked up (and is not in the repository).
    const odd = await grpcError(callUnary(client, 'RepositoryModelLoad', { model_name: 'a..b' }));
    assert.equal(odd.code, INTERNAL);
    assert.match(odd.details, /^failed to load 'a\.\.b'/);
  });

  it('BAD CALL - unload checks no name (Triton): ../etc is a name the repositories never had', async () => {
    const want = "failed to unload '../etc': no model named '../etc' is loaded or in the model repositories";
    assert.deepEqual(await grpcError(callUnary(client, 'RepositoryModelUnload', { model_name: '../etc' })), {
      code: NOT_FOUND,
      details: want,
    });
    const res = await post(`${s.url}/v2/repository/models/..%2Fetc/unload`);
    assert.deepEqual(await httpError(res), { status: 404, error: want });
  });
});

describe('Triton wording: --http-max-input-size=0', () => {
  it('BAD FLAG - is refused before any repository is read, in Triton words', async () => {
    // A repository that does not exist: had the flag been checked after the repositories, that would fail first.
    const missing = await mkdtemp(join(tmpdir(), 'nereid-audit-'));
    await rm(missing, { recursive: true });
    await assert.rejects(startNereid({ repositories: [missing], httpMaxInputSize: 0 }), {
      message: '--http-max-input-size must be greater than 0.',
    });
    await assert.rejects(startNereid({ repositories: [missing], grpcMaxInputSize: -1 }), {
      message: '--grpc-max-input-size must be greater than 0.',
    });
  });
});
