import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { accumulatorModel, writeModel } from '../fixtures/onnx-builder.js';
import { accIo, infer, type Reply, START_END_READY, STATE, startSequenceServer } from '../helpers/sequence.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * What the sequence batcher refuses, with Triton's words: requests without a correlation id or START, sequence
 * parameters of the wrong type or to a model without sequence_batching, batches, control inputs sent by the
 * client (HTTP; gRPC's in sequence-grpc.test.ts), and configs whose initial_state, CORRID or control inputs are wrong.
 */

describe('sequence batcher: bad requests (HTTP)', () => {
  let s: TestServer;

  before(async () => {
    s = await startSequenceServer(['acc', 'acc_dyna', 'acc_string', 'slots', 'plain']);
  });
  after(async () => {
    await s?.close();
  });

  const cases: [string, string, number, Record<string, unknown>, RegExp | string, number[]?][] = [
    [
      'no correlation id',
      'slots',
      1,
      {},
      "inference request to model 'slots' must specify a non-zero or non-empty correlation ID",
    ],
    [
      'id 0 is no id',
      'slots',
      1,
      { sequence_id: 0, sequence_start: true },
      /must specify a non-zero or non-empty correlation ID/,
    ],
    [
      'an unknown id without START',
      'slots',
      1,
      { sequence_id: 4242 },
      "inference request for sequence 4242 to model 'slots' must specify the START flag on the first request of the sequence",
    ],
    ['END without START', 'slots', 1, { sequence_id: 4243, sequence_end: true }, /must specify the START flag/],
    [
      'sequence parameters to a model without sequence_batching',
      'plain',
      1,
      { sequence_id: 3, sequence_start: true },
      /model 'plain' has sequence parameters .* but the model has no sequence_batching/,
    ],
    [
      'a batch of 2',
      'acc',
      1,
      { sequence_id: 3, sequence_start: true },
      "inference request to model 'acc' must specify batch-size 1 due to requirements of sequence batcher",
      [2, 1],
    ],
    [
      'a string id for a UINT64 CORRID',
      'acc_dyna',
      1,
      { sequence_id: 'x', sequence_start: true },
      "sequence batching control 'CORRID' data-type is 'BYTES', but model 'acc_dyna' expects 'UINT64'",
    ],
    [
      'an integer id for a STRING CORRID',
      'acc_string',
      1,
      { sequence_id: 5, sequence_start: true },
      "sequence batching control 'CORRID' data-type is 'UINT64', but model 'acc_string' expects 'BYTES'",
    ],
    [
      'sequence_start not a boolean',
      'slots',
      1,
      { sequence_id: 3, sequence_start: 'yes' },
      /parameter 'sequence_start' must be a boolean/,
    ],
    [
      'sequence_id a float',
      'slots',
      1,
      { sequence_id: 1.5, sequence_start: true },
      /'sequence_id' must be an unsigned integer or a string/,
    ],
    [
      'REGRESSION sequence_id -1 was accepted',
      'slots',
      1,
      { sequence_id: -1, sequence_start: true },
      `parameter 'sequence_id' must be an unsigned integer or a string, got "-1"`,
    ],
    [
      'a control input sent by the client',
      'slots',
      1,
      { sequence_id: 3, sequence_start: true },
      /unexpected inference input 'START'/,
    ],
  ];
  for (const [title, model, value, params, message, shape] of cases) {
    it(`BAD REQUEST - ${title}`, async () => {
      let r: Reply;
      if (title.startsWith('a control input')) {
        const res = await fetch(`${s.url}/v2/models/${model}/infer`, {
          method: 'POST',
          body: JSON.stringify({
            inputs: [
              { name: 'INPUT0', shape: [1, 1], datatype: 'INT32', data: [1] },
              { name: 'START', shape: [1, 1], datatype: 'INT32', data: [1] },
            ],
            parameters: params,
          }),
        });
        r = { status: res.status, body: (await res.json()) as Reply['body'] };
      } else r = await infer(s.url, model, value, params, shape);
      assert.equal(r.status, 400, JSON.stringify(r.body));
      if (typeof message === 'string') assert.equal(r.body.error, message);
      else assert.match(r.body.error ?? '', message);
    });
  }
});

describe('sequence batcher: bad configs', () => {
  it('BAD CONFIG - a missing initial_state file, a bad CORRID type and an unknown control input fail their loads, naming them', async () => {
    const repo = await mkdtemp(join(tmpdir(), 'nereid-seq-bad-'));
    const bad: Record<string, string> = {
      no_file: `backend: "onnxruntime" max_batch_size: 4 ${accIo}
        sequence_batching { control_input [ ${START_END_READY} ]
          state [{ input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ]
            initial_state { name: "s" data_type: TYPE_INT32 dims: [ 1 ] data_file: "missing.bin" } }] }`,
      bad_corrid: `backend: "onnxruntime" max_batch_size: 4 ${accIo}
        sequence_batching { control_input [ ${START_END_READY}, { name: "CORRID" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 }] } ] ${STATE} }`,
      no_such_input: `backend: "onnxruntime" max_batch_size: 4 ${accIo}
        sequence_batching { control_input [ ${START_END_READY}, { name: "NOPE" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }] } ] ${STATE} }`,
    };
    try {
      for (const [name, config] of Object.entries(bad)) {
        await mkdir(join(repo, name, '1'), { recursive: true });
        await writeFile(join(repo, name, 'config.pbtxt'), config);
        await writeModel(
          join(repo, name, '1', 'model.onnx'),
          accumulatorModel(name === 'bad_corrid' ? { corrid: 'UINT64' } : {}),
        );
      }
      const s = await startNereid({ repositories: [repo], exitOnError: false });
      try {
        const index = (await (await fetch(`${s.url}/v2/repository/index`, { method: 'POST' })).json()) as {
          name: string;
          state: string;
          reason: string;
        }[];
        const reason = (n: string) => index.find((m) => m.name === n)?.reason ?? '';
        assert.match(
          reason('no_file'),
          /initial_state 's' of state 'STATE_IN': cannot read .*missing\.bin: no such file/,
        );
        assert.match(reason('bad_corrid'), /unexpected data type for control CONTROL_SEQUENCE_CORRID/);
        assert.match(reason('no_such_input'), /sequence_batching feeds input 'NOPE', but the model file's inputs are/);
        assert.ok(index.every((m) => m.state === 'UNAVAILABLE'));
      } finally {
        await s.close();
      }
    } finally {
      await rm(repo, { recursive: true, force: true });
    }
  });
});
