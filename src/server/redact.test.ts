import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { InvalidArgError } from '../core/errors.js';
import { PathRedactor, redactAbsolutePaths } from './redact.js';

describe('PathRedactor', () => {
  const r = new PathRedactor(['/srv/models', '/data/repo2/']);

  it('writes paths under a repository relative to it', () => {
    assert.equal(
      r.redact("model 'simple': model file /srv/models/simple/1/model.onnx not found"),
      "model 'simple': model file simple/1/model.onnx not found",
    );
    assert.equal(r.redact('open /data/repo2/m/labels.txt failed'), 'open m/labels.txt failed');
  });

  it('writes paths in a load request override folder relative to it', () => {
    const dir = join(tmpdir(), 'nereid-overrides-1234-AbC123', 'load-XyZ789', 'up', '1', 'x.onnx');
    assert.equal(r.redact(`model file ${dir} not found`), 'model file up/1/x.onnx not found');
  });

  it('keeps only the last segment of any other absolute path', () => {
    assert.equal(
      r.redact("failed: ENOENT: no such file or directory, open '/usr/lib/x86_64/libfoo.so'"),
      "failed: ENOENT: no such file or directory, open '…/libfoo.so'",
    );
    assert.equal(redactAbsolutePaths('path=/opt/a/b'), 'path=…/b');
  });

  it('keeps names whose first folder is not on this machine: ONNX node names, URL paths, placeholders', () => {
    for (const m of [
      "Non-zero status code returned while running Reshape node. Name:'/encoder/layer.0/Reshape' Status Message: x",
      'Node (/embeddings/Gather_1) Op (Gather) [ShapeInferenceError] bad',
      "model 'm' is decoupled; use gRPC ModelStreamInfer or HTTP POST /v2/models/m/generate_stream",
      "plugins: 'a.so' is not an absolute path; give each plugin library as /path/lib.so",
    ]) {
      assert.equal(r.redact(m), m);
      assert.equal(redactAbsolutePaths(m), m);
    }
    // A server path beside a node name: only the path goes.
    assert.equal(
      redactAbsolutePaths("node '/encoder/MatMul' reading /usr/lib/secret/weights.bin"),
      "node '/encoder/MatMul' reading …/weights.bin",
    );
  });

  it('leaves messages without paths alone', () => {
    for (const m of ['expected shape [-1,16], got [16]', 'content type application/json', 'version 1/2', '']) {
      assert.equal(r.redact(m), m);
    }
  });

  it('redactError keeps the class and code, and the original as the cause', () => {
    const e = new InvalidArgError('bad /srv/models/simple/config.pbtxt');
    const out = r.redactError(e) as InvalidArgError;
    assert.ok(out instanceof InvalidArgError);
    assert.equal(out.code, 'INVALID_ARG');
    assert.equal(out.message, 'bad simple/config.pbtxt');
    assert.equal(out.cause, e);
  });
});
