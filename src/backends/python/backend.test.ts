import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { EXAMPLES, fp32, loadPython, outputOf, recorder, request, type Loaded } from '../../../test/helpers/python-models.js';

describe('python backend: add_sub example', () => {
  let m: Loaded;
  after(() => m?.handle.unload());

  it('adds and subtracts through a python process and shared memory', async () => {
    m = await loadPython('add_sub', { dir: EXAMPLES });
    const inst = await m.instance();
    const r = recorder();
    const timings = await inst.execute(
      [request([fp32('INPUT0', [1, 2, 3, 4]), fp32('INPUT1', [10, 20, 30, 40])], ['OUTPUT1', 'OUTPUT0'])],
      r,
      new AbortController().signal,
    );
    const resp = r.finals().get(0);
    assert.deepEqual([...(outputOf(resp, 'OUTPUT0').data as Float32Array)], [11, 22, 33, 44]);
    assert.deepEqual([...(outputOf(resp, 'OUTPUT1').data as Float32Array)], [-9, -18, -27, -36]);
    // Outputs in the order the request asked for them.
    assert.deepEqual(
      (resp as { outputs: { name: string }[] }).outputs.map((o) => o.name),
      ['OUTPUT1', 'OUTPUT0'],
    );
    assert.ok(timings.computeInferNs > 0);
    await inst.destroy();
  });
});
