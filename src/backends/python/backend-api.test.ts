import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UnavailableError } from '../../core/errors.js';
import type { InferRequest, InferResponse } from '../../core/inference.js';
import type { Tensor } from '../../core/tensor.js';
import {
  EXAMPLES,
  FIXTURES,
  fixtureConfig,
  fp32,
  trackedLoads,
  outputOf,
  recorder,
  request,
} from '../../../test/helpers/python-models.js';
import { pythonBackend } from './backend.js';
import { noopLogger } from '../../core/logger.js';
import { join } from 'node:path';

/**
 * The python backend's API past execute(): decoupled response senders, BLS calls back into the server, and
 * auto_complete_config. Execute, faults, cancellation and configuration: backend.test.ts.
 */

const never = new AbortController().signal;
const load = trackedLoads();

describe('python backend: decoupled models', () => {
  it('streams responses from threads after execute returned, then the final flag alone (repeat)', async () => {
    const m = await load('repeat');
    const inst = await m.instance();
    const r = recorder();
    const ins: Tensor[] = [
      { name: 'IN', datatype: 'INT32', shape: [3], data: Int32Array.from([5, 6, 7]) },
      { name: 'DELAY', datatype: 'UINT32', shape: [3], data: Uint32Array.from([10, 10, 10]) },
      { name: 'WAIT', datatype: 'UINT32', shape: [1], data: Uint32Array.from([20]) },
    ];
    await inst.execute([request(ins, ['OUT', 'IDX'])], r, never);
    // execute() returned before the responses: the instance is free for the next batch while its threads stream.
    assert.ok(r.sent.length < 4, 'execute resolved when the model returned, not at the final response');
    await r.allFinal(1);
    assert.equal(r.sent.length, 4);
    assert.deepEqual(
      r.sent.slice(0, 3).map((s) => [...(outputOf(s.response, 'OUT').data as Int32Array)][0]),
      [5, 6, 7],
    );
    assert.ok(r.sent.slice(0, 3).every((s) => !s.final));
    assert.deepEqual(r.sent[3], { index: 0, response: null, final: true });
  });

  it('answers through response senders inside execute (square), for several requests of a batch', async () => {
    const m = await load('square');
    const inst = await m.instance();
    const r = recorder();
    const one = (n: number) =>
      request([{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.from([n]) }], ['OUT']);
    await inst.execute([one(3), one(0), one(2)], r, never);
    const count = (i: number) => r.sent.filter((s) => s.index === i && s.response !== null).length;
    assert.deepEqual([count(0), count(1), count(2)], [3, 0, 2]);
    assert.equal(r.sent.filter((s) => s.final).length, 3);
  });
});

describe('python backend: BLS', () => {
  const caller = (calls: InferRequest[]) => ({
    async infer(req: InferRequest): Promise<InferResponse> {
      calls.push(req);
      if (req.model !== 'add_sub') throw new UnavailableError(`Request for unknown model: '${req.model}' is not found`);
      const a = req.inputs.find((t) => t.name === 'INPUT0')!.data as Float32Array;
      const b = req.inputs.find((t) => t.name === 'INPUT1')!.data as Float32Array;
      return {
        model: 'add_sub',
        version: '1',
        outputs: [
          { name: 'OUTPUT0', datatype: 'FP32', shape: [4], data: a.map((v, i) => v + b[i]) },
          { name: 'OUTPUT1', datatype: 'FP32', shape: [4], data: a.map((v, i) => v - b[i]) },
        ],
      };
    },
  });
  const blsRequest = (model: string, extra = {}) =>
    request(
      [
        { name: 'MODEL_NAME', datatype: 'BYTES', shape: [1], data: [Buffer.from(model)] },
        fp32('INPUT0', [1, 2, 3, 4]),
        fp32('INPUT1', [1, 1, 1, 1]),
      ],
      ['OUTPUT0', 'OUTPUT1'],
      extra,
    );

  it('exec() and async_exec() call another model through the host', async () => {
    const calls: InferRequest[] = [];
    const m = await load('bls', { caller: caller(calls) });
    const inst = await m.instance();
    for (const extra of [{}, { parameters: { async: true } }]) {
      const r = recorder();
      await inst.execute([blsRequest('add_sub', extra)], r, never);
      assert.deepEqual([...(outputOf(r.finals().get(0), 'OUTPUT0').data as Float32Array)], [2, 3, 4, 5]);
      assert.deepEqual([...(outputOf(r.finals().get(0), 'OUTPUT1').data as Float32Array)], [0, 1, 2, 3]);
    }
    assert.equal(calls.length, 3);
    assert.deepEqual(calls[0].outputs, [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }]);
  });

  it('BAD CALL - a BLS call to an unknown model answers the model with the error', async () => {
    const m = await load('bls', { caller: caller([]) });
    const inst = await m.instance();
    await assert.rejects(
      inst.execute([blsRequest('nope')], recorder(), never),
      /TritonModelException: Request for unknown model: 'nope' is not found/,
    );
  });
});

describe('python backend: auto-complete', () => {
  it("runs the model's auto_complete_config in a short-lived process", async () => {
    const backend = pythonBackend();
    const dir = join(FIXTURES, 'auto_complete');
    const done = await backend.autoComplete(
      { name: 'auto_complete', backend: 'python' },
      {
        modelName: 'auto_complete',
        modelPath: join(dir, '1', 'model.py'),
        backendConfig: {},
        autoComplete: true,
        logger: noopLogger,
      },
    );
    assert.equal(done.max_batch_size, 4);
    assert.deepEqual(
      done.input?.map((i) => [i.name, i.data_type, i.dims]),
      [
        ['INPUT0', 'TYPE_FP32', [4]],
        ['INPUT1', 'TYPE_FP32', [4]],
      ],
    );
    assert.deepEqual(
      done.output?.map((o) => o.name),
      ['OUTPUT0'],
    );
    assert.deepEqual(done.dynamic_batching, {});
  });

  it('BAD CONFIG - a config that contradicts auto_complete_config fails with both sides named', async () => {
    const backend = pythonBackend();
    const dir = join(FIXTURES, 'auto_complete');
    await assert.rejects(
      backend.autoComplete(
        { name: 'auto_complete', backend: 'python', input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [4] }] },
        {
          modelName: 'auto_complete',
          modelPath: join(dir, '1', 'model.py'),
          backendConfig: {},
          autoComplete: true,
          logger: noopLogger,
        },
      ),
      /input 'INPUT0' has data_type TYPE_INT32 in the configuration, but auto_complete_config sets TYPE_FP32/,
    );
  });

  it('leaves the config alone with auto-complete off', async () => {
    const config = fixtureConfig(join(EXAMPLES, 'add_sub'));
    const out = await pythonBackend().autoComplete(config, {
      modelName: 'add_sub',
      modelPath: '/nonexistent/model.py',
      backendConfig: {},
      autoComplete: false,
      logger: noopLogger,
    });
    assert.equal(out, config);
  });
});
