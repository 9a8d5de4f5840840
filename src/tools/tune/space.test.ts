import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { ModelConfig } from '../../config/model-config.js';
import { paretoFront } from './chart.js';
import type { PointResult } from './measure.js';
import { allChoices, alongDimension, buildSpace, configOf, defaultChoice, describeChoice } from './space.js';

const simple: ModelConfig = { name: 'simple', platform: 'onnxruntime_onnx', max_batch_size: 8 };

describe('tune space', () => {
  it('starts from the default config: choice zero changes nothing', () => {
    const space = buildSpace(simple, { cores: 2 });
    assert.deepEqual(configOf(space, simple, defaultChoice(space)), simple);
    assert.equal(describeChoice(space, defaultChoice(space)), 'default');
    assert.deepEqual(
      space.dimensions.map((d) => d.name),
      ['instances', 'dynamic_batching', 'max_batch_size', 'intra_op_thread_count'],
    );
  });

  it('never prefers a batch size above max_batch_size, whatever the combination', () => {
    const space = buildSpace(simple, { cores: 2 });
    for (const choice of allChoices(space)) {
      const c = configOf(space, simple, choice);
      for (const size of c.dynamic_batching?.preferred_batch_size ?? []) {
        assert.ok(size <= (c.max_batch_size ?? 0), `${describeChoice(space, choice)}: preferred ${size}`);
      }
    }
  });

  it('has no batching knobs for a model that does not batch, and instance counts as asked', () => {
    const python: ModelConfig = { name: 'p', backend: 'python', instance_group: [{ kind: 'KIND_CPU', count: 1 }] };
    const space = buildSpace(python, { cores: 8, instanceCounts: [3] });
    assert.deepEqual(
      space.dimensions.map((d) => [d.name, d.settings.map((s) => s.label)]),
      [['instances', ['as configured', '3×CPU']]],
    );
  });

  it('walks one dimension at a time in quick mode', () => {
    const space = buildSpace(simple, { cores: 2 });
    const along = alongDimension(space, defaultChoice(space), 1);
    assert.equal(along.length, space.dimensions[1].settings.length - 1);
    assert.ok(along.every((c) => c.every((v, j) => j === 1 || v === 0)));
  });

  it('marks the Pareto front: more throughput at no more p99', () => {
    const p = (throughput: number, p99Ms: number) => ({ throughput, p99Ms }) as PointResult;
    assert.deepEqual([...paretoFront([p(100, 5), p(200, 10), p(150, 12), p(200, 8)])].sort(), [0, 3]);
  });
});
