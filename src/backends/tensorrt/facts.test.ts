import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseModelConfigOrThrow } from '../../config/index.js';
import {
  checkAgainstPlan,
  completeFromPlan,
  instanceProfiles,
  maxBatchOfProfiles,
  requestOutsideProfiles,
  type PlanFacts,
  type PlanTensor,
} from './facts.js';

const t = (name: string, mode: 'input' | 'output', dims: number[], trt = 'FLOAT'): PlanTensor => ({
  name,
  mode,
  trt_dtype: trt,
  datatype: trt === 'FLOAT' ? 'FP32' : trt === 'INT32' ? 'INT32' : null,
  dims,
  shape_tensor: false,
  location: 'device',
});

const facts = (over: Partial<PlanFacts> = {}): PlanFacts => ({
  trt_version: '11.2.1.2',
  io: [t('x', 'input', [-1, -1]), t('y', 'output', [-1, -1])],
  profiles: [
    { index: 0, inputs: { x: { min: [1, 1], opt: [4, 64], max: [8, 128] } } },
    { index: 1, inputs: { x: { min: [1, 1], opt: [16, 256], max: [32, 512] } } },
  ],
  ...over,
});
const cfg = (text: string) => parseModelConfigOrThrow(`name: "m"\n${text}`, 'config.pbtxt');
const noWarn = (m: string) => assert.fail(`unexpected warning: ${m}`);

describe('TensorRT auto-complete (Triton rules for explicit-batch engines)', () => {
  it('fills inputs, outputs and max_batch_size from profile 0 when no group lists a profile', () => {
    const c = completeFromPlan(cfg(''), facts(), 'm', noWarn);
    assert.equal(c.max_batch_size, 8);
    assert.deepEqual(c.input, [{ name: 'x', data_type: 'TYPE_FP32', dims: [-1] }]);
    assert.deepEqual(c.output, [{ name: 'y', data_type: 'TYPE_FP32', dims: [-1] }]);
    assert.deepEqual(c.dynamic_batching, {});
  });

  it('uses the largest max batch over the profiles the groups list', () => {
    const c = completeFromPlan(cfg('instance_group [{ profile: ["0"] }, { profile: ["1"] }]'), facts(), 'm', noWarn);
    assert.equal(c.max_batch_size, 32);
  });

  it('takes dims in the config with as many dims as the plan as "no batching", and says so', () => {
    const warnings: string[] = [];
    const c = completeFromPlan(cfg('input [{ name: "x" dims: [-1, -1] }]'), facts(), 'm', (w) => warnings.push(w));
    assert.equal(c.max_batch_size, 0);
    assert.equal(c.dynamic_batching, undefined);
    assert.deepEqual(c.input?.[0], { name: 'x', dims: [-1, -1], data_type: 'TYPE_FP32' });
    assert.match(warnings[0], /imply that batching is off/);
  });

  it('an engine whose inputs have a fixed dim 0 does not batch (all dims go to the config)', () => {
    const c = completeFromPlan(
      cfg(''),
      facts({
        io: [t('x', 'input', [1, 3]), t('y', 'output', [1, 3])],
        profiles: [{ index: 0, inputs: { x: { min: [1, 3], opt: [1, 3], max: [1, 3] } } }],
      }),
      'm',
      noWarn,
    );
    assert.equal(c.max_batch_size, 0);
    assert.deepEqual(c.input?.[0].dims, [1, 3]);
  });

  it('a scalar tensor gets dims [1] with reshape [] (dims may not be empty)', () => {
    const c = completeFromPlan(
      cfg(''),
      facts({
        io: [t('x', 'input', [-1]), t('y', 'output', [-1])],
        profiles: [{ index: 0, inputs: { x: { min: [1], opt: [2], max: [4] } } }],
      }),
      'm',
      noWarn,
    );
    assert.deepEqual(c.input?.[0], { name: 'x', data_type: 'TYPE_FP32', dims: [1], reshape: { shape: [] } });
  });

  it('BAD CONFIG - contradicting dims, a batch hint without a batch dim, max_batch_size beyond the profiles', () => {
    assert.throws(
      () =>
        completeFromPlan(
          cfg('input [{ name: "x" dims: [-1] }]\noutput [{ name: "y" dims: [-1, -1] }]'),
          facts(),
          'm',
          noWarn,
        ),
      /contradict each other on whether the model batches/,
    );
    assert.throws(
      () =>
        completeFromPlan(
          cfg('input [{ name: "x" dims: [3] }]'),
          facts({
            io: [t('x', 'input', [1, 3]), t('y', 'output', [1, 3])],
            profiles: [{ index: 0, inputs: { x: { min: [1, 3], opt: [1, 3], max: [1, 3] } } }],
          }),
          'm',
          noWarn,
        ),
      /imply batching, but the plan's inputs have no dynamic batch dim/,
    );
    assert.throws(
      () => completeFromPlan(cfg('max_batch_size: 9'), facts(), 'm', noWarn),
      /max_batch_size 9, but the plan's optimization profile\(s\) 0 support at most 8/,
    );
  });

  it('UNSUPPORTED - shape tensors and datatypes Triton has no name for', () => {
    const shape = facts({ io: [{ ...t('x', 'input', [2]), shape_tensor: true }, t('y', 'output', [-1])] });
    assert.throws(() => completeFromPlan(cfg(''), shape, 'm', noWarn), /'x' is a shape tensor/);
    const fp8 = facts({ io: [t('x', 'input', [-1, -1], 'FP8'), t('y', 'output', [-1, -1])] });
    assert.throws(
      () => completeFromPlan(cfg(''), fp8, 'm', noWarn),
      /'x' is TensorRT FP8, which has no Triton datatype/,
    );
  });
});

describe('TensorRT config check against the plan', () => {
  it('BAD CONFIG - an input the plan lacks, a missing input, a batch dim the plan cannot take, a group whose profiles are too small', () => {
    assert.throws(
      () =>
        checkAgainstPlan(cfg('max_batch_size: 8\ninput [{ name: "z" data_type: TYPE_FP32 dims: [-1] }]'), facts(), 'm'),
      /declares input 'z', but the plan's inputs are \['x'\]/,
    );
    assert.throws(
      () =>
        checkAgainstPlan(
          cfg('max_batch_size: 8\noutput [{ name: "y" data_type: TYPE_FP32 dims: [-1] }]'),
          facts(),
          'm',
        ),
      /needs input\(s\) \['x'\]/,
    );
    assert.throws(
      () =>
        checkAgainstPlan(
          cfg('max_batch_size: 8\ninput [{ name: "x" data_type: TYPE_FP32 dims: [-1, 2] }]'),
          facts(),
          'm',
        ),
      /has shape \[-1,-1\] in the plan, but config.pbtxt gives \[-1,-1,2\]/,
    );
    assert.throws(
      () =>
        checkAgainstPlan(
          cfg(
            'max_batch_size: 16\ninput [{ name: "x" data_type: TYPE_FP32 dims: [-1] }]\ninstance_group [{ profile: ["1"] }, { profile: ["0"] }]',
          ),
          facts(),
          'm',
        ),
      /max_batch_size 16 exceeds what instance_group\[1\]'s profile\(s\) 0 support \(8\)/,
    );
  });
});

describe('TensorRT profiles of an instance and requests against them', () => {
  it('resolves profile names to indices (profile 0 by default) and refuses others', () => {
    assert.deepEqual(instanceProfiles([], facts(), 'w'), [0]);
    assert.deepEqual(instanceProfiles(['1', '0', '1'], facts(), 'w'), [1, 0]);
    assert.throws(
      () => instanceProfiles(['fast'], facts(), 'w'),
      /profile 'fast' is not a profile index \(expected 0\.\.1\)/,
    );
    assert.throws(() => instanceProfiles(['2'], facts(), 'w'), /profile 2 does not exist/);
    assert.equal(maxBatchOfProfiles(facts(), [0, 1]), 32);
  });

  it('accepts a request some profile holds; names the input and every allowed range otherwise', () => {
    const f = facts();
    assert.equal(requestOutsideProfiles(f, [0, 1], new Map([['x', [20, 300]]])), undefined);
    assert.equal(
      requestOutsideProfiles(f, [0], new Map([['x', [20, 300]]])),
      "input 'x' shape [20,300] is outside every optimization profile of this instance (profile 0: [1..8,1..128])",
    );
    assert.equal(
      requestOutsideProfiles(f, [0, 1], new Map([['x', [2, 600]]])),
      "input 'x' shape [2,600] is outside every optimization profile of this instance (profile 0: [1..8,1..128]; profile 1: [1..32,1..512])",
    );
  });

  it('needs one profile to hold every input together', () => {
    const f = facts({
      io: [t('a', 'input', [-1, 4]), t('b', 'input', [-1, 4]), t('y', 'output', [-1, 4])],
      profiles: [
        {
          index: 0,
          inputs: { a: { min: [1, 4], opt: [1, 4], max: [2, 4] }, b: { min: [5, 4], opt: [5, 4], max: [8, 4] } },
        },
        {
          index: 1,
          inputs: { a: { min: [5, 4], opt: [5, 4], max: [8, 4] }, b: { min: [1, 4], opt: [1, 4], max: [2, 4] } },
        },
      ],
    });
    assert.match(
      requestOutsideProfiles(
        f,
        [0, 1],
        new Map([
          ['a', [1, 4]],
          ['b', [1, 4]],
        ]),
      ) ?? '',
      /fit no single optimization profile of this instance together/,
    );
  });
});
