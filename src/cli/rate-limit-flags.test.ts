import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseFlags } from './flags.js';
import { parseRateLimitMode, parseRateLimitResources } from './rate-limit-flags.js';

describe('--rate-limit and --rate-limit-resource', () => {
  it("reads Triton's documented command line", () => {
    const { values } = parseFlags([
      '--rate-limit=execution_count',
      '--rate-limit-resource=R1:10',
      '--rate-limit-resource=R2:5:0',
      '--rate-limit-resource=R2:8:1',
      '--rate-limit-resource=R3:2',
    ]);
    assert.equal(parseRateLimitMode(values['rate-limit']), 'execution_count');
    assert.deepEqual(parseRateLimitResources(values['rate-limit-resource']), [
      { name: 'R1', count: 10 },
      { name: 'R2', count: 5, device: 0 },
      { name: 'R2', count: 8, device: 1 },
      { name: 'R3', count: 2 },
    ]);
  });

  it('is off when not given, and takes any case as Triton does', () => {
    assert.equal(parseRateLimitMode(undefined), 'off');
    assert.equal(parseRateLimitMode('OFF'), 'off');
    assert.equal(parseRateLimitMode('Execution_Count'), 'execution_count');
  });

  it("BAD CALL - an unknown mode gets Triton's 'invalid argument for --rate-limit'", () => {
    assert.throws(() => parseRateLimitMode('batch_count'), /^InvalidArgError: invalid argument for --rate-limit/);
  });

  it("BAD CALL - a resource without a count, with a bad count or with four parts gets Triton's format message", () => {
    for (const bad of ['R1', 'R1:', ':4', 'R1:four', 'R1:-1', 'R1:4:gpu', 'R1:4:0:1']) {
      assert.throws(
        () => parseRateLimitResources([bad]),
        new RegExp(
          `--rate-limit-resource option format is '<resource_name>:<count>:<device>' or '<resource_name>:<count>'\\. Got ${bad}$`,
        ),
        bad,
      );
    }
  });
});
