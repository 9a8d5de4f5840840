import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fingerprint, selectVersions } from './scan.js';

describe('version policy', () => {
  it('picks the latest version by default, latest N, all, or the specific ones present', () => {
    assert.deepEqual(selectVersions([1, 2, 3], undefined), [3]);
    assert.deepEqual(selectVersions([1, 2, 3], { latest: { num_versions: 2 } }), [2, 3]);
    assert.deepEqual(selectVersions([1, 2, 3], { latest: { num_versions: 9 } }), [1, 2, 3]);
    assert.deepEqual(selectVersions([1, 2, 3], { all: {} }), [1, 2, 3]);
    assert.deepEqual(selectVersions([1, 2, 3], { specific: { versions: [3, 1, 7] } }), [1, 3]);
    assert.deepEqual(selectVersions([], undefined), []);
  });
});

describe('fingerprint (poll mode)', () => {
  it("REGRESSION poll reload after the first TensorRT build - engine caches in a version folder are not the model's", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-fp-'));
    try {
      await mkdir(join(dir, '1', 'trt-cache'), { recursive: true });
      await writeFile(join(dir, '1', 'model.onnx'), 'm');
      const before = await fingerprint(dir);
      await writeFile(join(dir, '1', 'TensorrtExecutionProvider_TRTKernel_graph_main_1_0_0_sm90.engine'), 'e');
      await writeFile(
        join(dir, '1', 'trt-cache', 'TensorrtExecutionProvider_TRTKernel_graph_main_1_0_0_sm90.profile'),
        'p',
      );
      await writeFile(join(dir, '1', 'TensorrtExecutionProvider_cache_sm90.timing'), 't');
      assert.equal(await fingerprint(dir), before);
      await writeFile(join(dir, '1', 'model.onnx'), 'changed');
      assert.notEqual(await fingerprint(dir), before, 'the model file still counts');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
