import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseGraphSpecs } from './graph-spec.js';
import { parseModelConfigOrThrow } from './text-parser.js';

const config = (spec: string, maxBatch = 8) =>
  parseModelConfigOrThrow(
    `name: "m" max_batch_size: ${maxBatch}
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] } ]
optimization { cuda { graphs: true ${spec} } }`,
    'config.pbtxt',
  );

describe('optimization.cuda.graph_spec', () => {
  it('reads batch sizes, input dims and graph_lower_bound', () => {
    const specs = parseGraphSpecs(
      config(`graph_spec [ { batch_size: 8 input { key: "x" value { dim: [ 16 ] } }
        graph_lower_bound { batch_size: 5 input { key: "x" value { dim: [ 16 ] } } } },
        { batch_size: 4 input { key: "x" value { dim: [ 16 ] } } } ]`),
      'm',
    );
    assert.deepEqual(specs, [
      { batchSize: 8, inputs: { x: [16] }, lowerBound: { batchSize: 5, inputs: { x: [16] } } },
      { batchSize: 4, inputs: { x: [16] } },
    ]);
    assert.deepEqual(parseGraphSpecs(config(''), 'm'), []);
  });

  it('BAD CONFIG - each mistake names the spec and what is wrong', () => {
    const bad: Array<[string, RegExp]> = [
      ['graph_spec { batch_size: 9 }', /graph_spec\[0\]: batch_size 9 must be between 1 and max_batch_size 8/],
      ['graph_spec { batch_size: 0 }', /batch_size 0 must be between 1/],
      ['graph_spec { batch_size: 2 input { key: "y" value { dim: [ 1 ] } } }', /input 'y' is not an input/],
      ['graph_spec { batch_size: 2 input { key: "x" value { dim: [ 0 ] } } }', /expected dim: \[...\] of positive/],
      [
        'graph_spec { batch_size: 2 graph_lower_bound { batch_size: 4 } }',
        /graph_lower_bound: batch_size 4 is above the graph's batch_size 2/,
      ],
    ];
    for (const [spec, re] of bad) assert.throws(() => parseGraphSpecs(config(spec), "model 'm'"), re, spec);
  });
});
