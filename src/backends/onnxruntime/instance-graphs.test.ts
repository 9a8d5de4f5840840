import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Logger } from '../../core/logger.js';
import { noopLogger } from '../../core/logger.js';
import type { TensorSignature } from '../contract.js';
import { isCaptureCollision, planGraphs } from './instance-graphs.js';

/** A logger that keeps its warnings (the messages an operator reads). */
function recorder(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  return Object.assign(Object.create(noopLogger) as Logger, {
    warnings,
    warn: (...args: unknown[]) => void warnings.push(String(args.find((a) => typeof a === 'string'))),
  });
}

const sig = (name: string, dims: number[], datatype: TensorSignature['datatype'] = 'INT32'): TensorSignature => ({
  name,
  datatype,
  dims,
});

describe('CUDA graphs captured at load (graph_spec)', () => {
  it('plans zero inputs of each spec in the session order, and the padded range from graph_lower_bound', () => {
    const log = recorder();
    const plan = planGraphs(
      [
        { batchSize: 8, inputs: { ids: [128] }, lowerBound: { batchSize: 5, inputs: {} } },
        { batchSize: 4, inputs: { ids: [128] } },
      ],
      [sig('ids', [-1, -1]), sig('mask', [-1, 128])],
      true,
      'instance m_0',
      log,
    );
    assert.deepEqual(
      plan.warm.map((w) => w.inputs.map((t) => [t.name, t.shape, (t.data as Int32Array).every((x) => x === 0)])),
      [
        [
          ['ids', [8, 128], true],
          ['mask', [8, 128], true],
        ],
        [
          ['ids', [4, 128], true],
          ['mask', [4, 128], true],
        ],
      ],
    );
    assert.deepEqual(
      plan.padded.map((p) => [p.lowerBound, p.batchSize, [...p.dims]]),
      [
        [
          5,
          8,
          [
            ['ids', [128]],
            ['mask', [128]],
          ],
        ],
        [
          4,
          4,
          [
            ['ids', [128]],
            ['mask', [128]],
          ],
        ],
      ],
    );
    assert.deepEqual(log.warnings, []);
  });

  it('a model without batching captures its spec shapes whole and pads nothing', () => {
    const plan = planGraphs([{ batchSize: 0, inputs: {} }], [sig('x', [2, 3], 'FP32')], false, 'i', noopLogger);
    assert.deepEqual(plan.warm[0]!.inputs[0]!.shape, [2, 3]);
    assert.deepEqual(plan.padded, []);
  });

  it('BAD CONFIG - a variable dim left open or a BYTES input skips that spec with a warning', () => {
    const log = recorder();
    const plan = planGraphs([{ batchSize: 2, inputs: {} }], [sig('ids', [-1, -1])], true, 'instance m_0', log);
    assert.deepEqual(plan.warm, []);
    assert.match(log.warnings[0]!, /graph_spec\[0\] is not captured: input 'ids' has variable dims \[-1,-1\]/);
    planGraphs([{ batchSize: 2, inputs: {} }], [sig('s', [-1, 1], 'BYTES')], true, 'i', log);
    assert.match(log.warnings[1]!, /input 's' is BYTES, which runs without a graph/);
  });

  it('BAD CONFIG - a lower bound with other non-batch dims is refused: only the batch is padded', () => {
    assert.throws(
      () =>
        planGraphs(
          [{ batchSize: 8, inputs: { ids: [128] }, lowerBound: { batchSize: 1, inputs: { ids: [64] } } }],
          [sig('ids', [-1, -1])],
          true,
          'instance m_0',
          noopLogger,
        ),
      /graph_lower_bound: input 'ids' has other dims than the spec; Nereid pads only the batch dimension/,
    );
  });
  it('tells a capture broken by another thread (retried at load) from a failure of the model', () => {
    for (const m of [
      "Non-zero status code returned while running Cast node. Name:'/Cast_1' Status Message: CUDA error cudaErrorStreamCaptureUnsupported:operation not permitted when stream is capturing",
      'CUDA failure 901: operation failed due to a previous error during capture ; GPU=0',
    ])
      assert.equal(isCaptureCollision(m), true, m);
    for (const m of ['CUDA failure 2: out of memory', "input 'ids': the model expects shape [-1,128]"])
      assert.equal(isCaptureCollision(m), false, m);
  });
});
