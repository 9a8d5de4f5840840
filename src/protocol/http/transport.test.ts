import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gzipSync, deflateSync } from 'node:zlib';
import { NereidError } from '../../core/errors.js';
import { decompress, requestCoding, responseCoding } from './compression.js';
import { PATHS } from './routes.js';

describe('compression', () => {
  it('reads Content-Encoding and refuses unknown codings with UNSUPPORTED', () => {
    assert.equal(requestCoding(undefined), undefined);
    assert.equal(requestCoding('identity'), undefined);
    assert.equal(requestCoding('GZIP'), 'gzip');
    assert.equal(requestCoding('deflate'), 'deflate');
    assert.throws(
      () => requestCoding('br'),
      (e: unknown) =>
        e instanceof NereidError && e.code === 'UNSUPPORTED' && /Unsupported compression type/.test(e.message),
    );
  });
  it('prefers gzip, honours q=0', () => {
    assert.equal(responseCoding('deflate, gzip'), 'gzip');
    assert.equal(responseCoding('gzip;q=0, deflate'), 'deflate');
    assert.equal(responseCoding('br'), undefined);
    assert.equal(responseCoding(undefined), undefined);
  });
  it('decompresses into an owned buffer and stops at the limit', async () => {
    const text = Buffer.from('hello');
    const out = await decompress(gzipSync(text), 'gzip', 100);
    assert.equal(Buffer.from(out).toString(), 'hello');
    assert.equal(out.byteOffset, 0);
    assert.equal(out.buffer.byteLength, out.byteLength);
    assert.equal(Buffer.from(await decompress(deflateSync(text), 'deflate', 100)).toString(), 'hello');
    await assert.rejects(
      decompress(gzipSync(Buffer.alloc(10_000)), 'gzip', 1000),
      /Decompressed data size exceeds the maximum allowed value of 1000 bytes/,
    );
  });
});

describe('routes', () => {
  it("matches Triton's model paths with a numeric version only", () => {
    assert.deepEqual(
      { ...PATHS.modelInfer.exec('/v2/models/simple/versions/3/infer')?.groups },
      { model: 'simple', version: '3' },
    );
    assert.equal(PATHS.modelInfer.exec('/v2/models/simple/infer')?.groups?.version, undefined);
    assert.equal(PATHS.modelInfer.exec('/v2/models/simple/versions/x/infer'), null);
    assert.equal(PATHS.modelMetadata.exec('/v2/models/a/b'), null);
    assert.ok(PATHS.statsAll.test('/v2/models/stats'));
  });
});
