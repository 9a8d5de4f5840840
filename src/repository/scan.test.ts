import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { selectVersions } from './scan.js';

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
