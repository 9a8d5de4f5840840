import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

// Triton's naming rules live in the engine (python/nereid_python/engines/pytorch/naming.py: it sees forward()'s
// signature); their cases run here with plain python3, no torch needed.
const SCRIPT = fileURLToPath(new URL('../../../test/fixtures/pytorch/test_naming.py', import.meta.url));

describe('pytorch naming rules', () => {
  it('maps inputs by forward() names, then INPUT__<i>, then config order; outputs by OUTPUT__<i>, then order', () => {
    const r = spawnSync('python3', [SCRIPT], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /naming ok/);
  });
});
