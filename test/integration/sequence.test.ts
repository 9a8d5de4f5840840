import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type * as grpc from '@grpc/grpc-js';
import { accumulatorModel, controlsEchoModel, ELEM, writeModel } from '../fixtures/onnx-builder.js';
import { callUnary, inferenceClient, int32Bytes, int32Of } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * The sequence batcher over HTTP and gRPC, on a real server: ONNX models made here with implicit state and
 * controls (onnxruntime in engine threads), and identity models with latency for slots, backlog and timeouts.
 */

const controls = (kinds: [string, string][]): string =>
  kinds.map(([name, kind]) => `{ name: "${name}" control [{ kind: ${kind} int32_false_true: [ 0, 1 ] }] }`).join(',');
const START_END_READY = controls([
  ['START', 'CONTROL_SEQUENCE_START'],
  ['END', 'CONTROL_SEQUENCE_END'],
  ['READY', 'CONTROL_SEQUENCE_READY'],
]);
const STATE = `state [{ input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] }]`;
const accIo = `input [{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }]
output [{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }]`;
const identIo = `input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]`;
const delay = (ms: number): string => `parameters { key: "execute_delay_ms" value { string_value: "${ms}" } }`;
const one = 'instance_group [{ count: 1 kind: KIND_CPU }]';

const MODELS: Record<string, { config: string; onnx?: Parameters<typeof writeModel>[1] }> = {
  acc: {
    config: `backend: "onnxruntime" max_batch_size: 4 ${accIo} ${one}
      sequence_batching { control_input [ ${START_END_READY} ] ${STATE} }`,
    onnx: accumulatorModel(),
  },
  // No batch dim: controls and state are [1]; the first state comes from initial_state/hundred.bin (100).
  acc_init: {
    config: `backend: "onnxruntime" max_batch_size: 0 ${accIo} ${one}
      sequence_batching { control_input [ ${START_END_READY} ]
        state [{ input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ]
          initial_state { name: "hundred" data_type: TYPE_INT32 dims: [ 1 ] data_file: "hundred.bin" } }] }`,
    onnx: accumulatorModel({ batching: false }),
  },
  acc_dyna: {
    config: `backend: "onnxruntime" max_batch_size: 4 ${accIo} ${one}
      sequence_batching { oldest { max_candidate_sequences: 4 }
        control_input [ ${START_END_READY}, { name: "CORRID" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }] } ]
        ${STATE} }`,
    onnx: accumulatorModel({ corrid: 'UINT64' }),
  },
  acc_string: {
    config: `backend: "onnxruntime" max_batch_size: 4 ${accIo} ${one}
      sequence_batching { control_input [ ${START_END_READY}, { name: "CORRID" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING }] } ]
        ${STATE} }`,
    onnx: accumulatorModel({ corrid: 'STRING' }),
  },
  controls: {
    config: `backend: "onnxruntime" max_batch_size: 2 ${one}
      input [{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }]
      output [{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "OUT_START" data_type: TYPE_FP32 dims: [ 1 ] },
        { name: "OUT_END" data_type: TYPE_BOOL dims: [ 1 ] }, { name: "OUT_READY" data_type: TYPE_INT32 dims: [ 1 ] },
        { name: "OUT_CORRID" data_type: TYPE_UINT64 dims: [ 1 ] }]
      sequence_batching { control_input [
        { name: "START" control [{ kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] }] },
        { name: "END" control [{ kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] }] },
        { name: "READY" control [{ kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] }] },
        { name: "CORRID" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }] } ] }`,
    onnx: controlsEchoModel(ELEM.UINT64),
  },
  // Two slots on one instance, 200 ms per execution: batches show slot positions and padding rows.
  slots: {
    config: `backend: "identity" max_batch_size: 2 ${identIo} ${one} ${delay(200)}
      sequence_batching { control_input [ ${START_END_READY} ] }`,
  },
  // One slot: a second sequence waits in the backlog.
  single: {
    config: `backend: "identity" max_batch_size: 1 ${identIo} ${one} ${delay(150)}
      sequence_batching { max_sequence_idle_microseconds: 5000000 }`,
  },
  idle: {
    config: `backend: "identity" max_batch_size: 1 ${identIo} ${one}
      sequence_batching { max_sequence_idle_microseconds: 200000 }`,
  },
  oldest: {
    config: `backend: "identity" max_batch_size: 4 ${identIo} ${one} ${delay(20)}
      sequence_batching { oldest { max_candidate_sequences: 4 preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 2000000 } }`,
  },
  plain: { config: `backend: "identity" max_batch_size: 4 ${identIo}` },
};

interface Reply {
  status: number;
  body: { error?: string; outputs?: { name: string; datatype: string; shape: number[]; data: (number | boolean)[] }[] };
}

async function infer(
  url: string,
  model: string,
  value: number,
  parameters: Record<string, unknown> = {},
  shape = [1, 1],
): Promise<Reply> {
  const input = model === 'acc' || model.startsWith('acc_') || model === 'controls' ? 'INPUT' : 'INPUT0';
  const res = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    body: JSON.stringify({
      inputs: [{ name: input, shape, datatype: 'INT32', data: Array(shape.reduce((a, b) => a * b)).fill(value) }],
      parameters,
    }),
  });
  return { status: res.status, body: (await res.json()) as Reply['body'] };
}

/** An output's data (the first output when no name is given). */
const out = (r: Reply, name?: string): (number | boolean)[] => {
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const o = name === undefined ? r.body.outputs?.[0] : r.body.outputs?.find((x) => x.name === name);
  return o?.data ?? [];
};

/** Sends `values` as one sequence, one request after the other; returns the first element of each OUTPUT. */
async function sequence(url: string, model: string, id: number | string, values: number[], shape?: number[]) {
  const results: (number | boolean)[] = [];
  for (const [i, v] of values.entries()) {
    const r = await infer(
      url,
      model,
      v,
      { sequence_id: id, sequence_start: i === 0, sequence_end: i === values.length - 1 },
      shape,
    );
    results.push(out(r)[0]);
  }
  return results;
}

const cumulative = (xs: number[], from = 0): number[] =>
  xs.map((_, i) => xs.slice(0, i + 1).reduce((a, b) => a + b, from));

async function batchSizes(url: string, model: string): Promise<Record<number, number>> {
  const res = await fetch(`${url}/v2/models/${model}/stats`);
  const s = (
    (await res.json()) as { model_stats: { batch_stats: { batch_size: number; compute_infer: { count: number } }[] }[] }
  ).model_stats[0];
  return Object.fromEntries(s.batch_stats.map((b) => [b.batch_size, b.compute_infer.count]));
}

describe('sequence batcher', () => {
  let repo: string;
  let s: TestServer;
  let client: grpc.Client;

  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-seq-'));
    for (const [name, m] of Object.entries(MODELS)) {
      await mkdir(join(repo, name, '1'), { recursive: true });
      await writeFile(join(repo, name, 'config.pbtxt'), m.config);
      if (m.onnx) await writeModel(join(repo, name, '1', 'model.onnx'), m.onnx);
    }
    await mkdir(join(repo, 'acc_init', 'initial_state'));
    await writeFile(join(repo, 'acc_init', 'initial_state', 'hundred.bin'), Buffer.from(Int32Array.of(100).buffer));
    s = await startNereid({ repositories: [repo] });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client?.close();
    await s?.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('keeps implicit state per sequence: two interleaved sequences accumulate independently (HTTP)', async () => {
    const a = [0, 11, 7, 5, 3];
    const b = [100, -11, -7, -5, -3];
    const got: [number[], number[]] = [[], []];
    for (let i = 0; i < a.length; i++) {
      const flags = { sequence_start: i === 0, sequence_end: i === a.length - 1 };
      const [ra, rb] = await Promise.all([
        infer(s.url, 'acc', a[i], { sequence_id: 1000, ...flags }),
        infer(s.url, 'acc', b[i], { sequence_id: 1001, ...flags }),
      ]);
      got[0].push(out(ra)[0] as number);
      got[1].push(out(rb)[0] as number);
    }
    assert.deepEqual(got[0], cumulative(a));
    assert.deepEqual(got[1], cumulative(b));
    // The state output is the batcher's: a client never sees it.
    const r = await infer(s.url, 'acc', 1, { sequence_id: 1000, sequence_start: true, sequence_end: true });
    assert.deepEqual(
      r.body.outputs?.map((o) => o.name),
      ['OUTPUT'],
    );
  });

  it('START resets the state: the same id starts over after END, and a START mid-sequence restarts it', async () => {
    assert.deepEqual(await sequence(s.url, 'acc', 7, [1, 2, 3]), [1, 3, 6]);
    assert.deepEqual(await sequence(s.url, 'acc', 7, [10, 20]), [10, 30]);
    assert.deepEqual(out(await infer(s.url, 'acc', 5, { sequence_id: 8, sequence_start: true })), [5]);
    assert.deepEqual(out(await infer(s.url, 'acc', 5, { sequence_id: 8, sequence_start: true })), [5]);
    assert.deepEqual(out(await infer(s.url, 'acc', 1, { sequence_id: 8, sequence_end: true })), [6]);
  });

  it('takes the first state from initial_state data_file, on a model without a batch dim', async () => {
    assert.deepEqual(await sequence(s.url, 'acc_init', 3, [1, 2, 3], [1]), [101, 103, 106]);
  });

  it('feeds CORRID as UINT64 (oldest strategy) and as a string', async () => {
    // OUTPUT adds the correlation id on the END request.
    assert.deepEqual(await sequence(s.url, 'acc_dyna', 40, [1, 2, 3]), [1, 3, 6 + 40]);
    assert.deepEqual(await sequence(s.url, 'acc_string', '42', [1, 2, 3]), [1, 3, 6 + 42]);
  });

  it('sends START (fp32), END (bool), READY (int32) and CORRID (uint64) with their configured values', async () => {
    const r1 = await infer(s.url, 'controls', 9, { sequence_id: 77, sequence_start: true });
    assert.deepEqual(
      [out(r1, 'OUT_START'), out(r1, 'OUT_END'), out(r1, 'OUT_READY'), out(r1, 'OUT_CORRID')],
      [[1], [false], [1], [77]],
    );
    const r2 = await infer(s.url, 'controls', 9, { sequence_id: 77 });
    assert.deepEqual([out(r2, 'OUT_START'), out(r2, 'OUT_END')], [[0], [false]]);
    const r3 = await infer(s.url, 'controls', 9, { sequence_id: 77, sequence_end: true });
    assert.deepEqual([out(r3, 'OUT_START'), out(r3, 'OUT_END'), out(r3, 'OUTPUT')], [[0], [true], [9]]);
  });

  it('keeps each sequence in its slot row: a batch pads the slots that have nothing ready', async () => {
    // t=0: A1 runs alone (slot 0). While it runs, B1 (slot 1) and A2 queue: the next batch is [A2, B1].
    // Then B2 alone: [padding, B2], still two rows.
    const a1 = infer(s.url, 'slots', 1, { sequence_id: 'A', sequence_start: true });
    await sleep(50);
    const b1 = infer(s.url, 'slots', 2, { sequence_id: 'B', sequence_start: true });
    const a2 = infer(s.url, 'slots', 3, { sequence_id: 'A', sequence_end: true });
    assert.deepEqual([out(await a1), out(await a2), out(await b1)], [[1], [3], [2]]);
    assert.deepEqual(out(await infer(s.url, 'slots', 4, { sequence_id: 'B', sequence_end: true })), [4]);
    assert.deepEqual(await batchSizes(s.url, 'slots'), { 1: 1, 2: 2 });
  });

  it('backlogs a sequence while every slot is taken, and runs it when a slot frees up', async () => {
    const order: string[] = [];
    const track = (p: Promise<Reply>, tag: string) =>
      p.then((r) => {
        order.push(tag);
        return r;
      });
    const a1 = track(infer(s.url, 'single', 1, { sequence_id: 1, sequence_start: true }), 'A1');
    await sleep(30);
    const b1 = track(infer(s.url, 'single', 2, { sequence_id: 2, sequence_start: true, sequence_end: true }), 'B1');
    await a1;
    await sleep(200);
    // B is still waiting for A's slot; A's END lets it in.
    assert.deepEqual(order, ['A1']);
    const a2 = track(infer(s.url, 'single', 3, { sequence_id: 1, sequence_end: true }), 'A2');
    assert.deepEqual([out(await a2), out(await b1)], [[3], [2]]);
    assert.deepEqual(order, ['A1', 'A2', 'B1']);
  });

  it('BAD REQUEST - a sequence idle past max_sequence_idle_microseconds is gone: its next request needs START', async () => {
    assert.deepEqual(out(await infer(s.url, 'idle', 1, { sequence_id: 55, sequence_start: true })), [1]);
    await sleep(400);
    const r = await infer(s.url, 'idle', 2, { sequence_id: 55 });
    assert.equal(r.status, 400);
    assert.equal(
      r.body.error,
      "inference request for sequence 55 to model 'idle' must specify the START flag on the first request of the sequence",
    );
    // Its slot was freed: a new sequence runs at once on the one-slot model.
    assert.deepEqual(
      out(await infer(s.url, 'idle', 3, { sequence_id: 56, sequence_start: true, sequence_end: true })),
      [3],
    );
  });

  it('oldest: forms a batch of the oldest requests of different sequences up to the preferred size', async () => {
    const rs = await Promise.all(
      [1, 2, 3, 4].map((id) =>
        infer(s.url, 'oldest', id, { sequence_id: id, sequence_start: true, sequence_end: true }),
      ),
    );
    assert.deepEqual(
      rs.map((r) => out(r)[0]),
      [1, 2, 3, 4],
    );
    assert.deepEqual(await batchSizes(s.url, 'oldest'), { 4: 1 });
  });

  describe('bad requests (HTTP)', () => {
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

  describe('over gRPC', () => {
    interface GrpcReply {
      outputs: { name: string }[];
      raw_output_contents: Buffer[];
    }
    const request = (model: string, value: number, parameters: Record<string, unknown>) => ({
      model_name: model,
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1] }],
      raw_input_contents: [int32Bytes([value])],
      parameters,
    });
    const seqParams = (id: string | number, start: boolean, end: boolean, kind: 'int64_param' | 'string_param') => ({
      sequence_id: { [kind]: id },
      sequence_start: { bool_param: start },
      sequence_end: { bool_param: end },
    });

    it('runs sequences with int64 and string ids (InferParameter), state kept per id', async () => {
      const values = [3, 4, 5];
      for (const [id, kind] of [
        ['1152921504606846981', 'int64_param'],
        ['session-1', 'string_param'],
      ] as const) {
        const got: number[] = [];
        for (const [i, v] of values.entries()) {
          const r = await callUnary<GrpcReply>(
            client,
            'ModelInfer',
            request('acc', v, seqParams(id, i === 0, i === 2, kind)),
          );
          got.push(int32Of(r.raw_output_contents[0])[0]);
        }
        assert.deepEqual(got, [3, 7, 12]);
      }
    });

    it('passes a uint64 id beyond 2^53 exactly to CORRID', async () => {
      const id = '1152921504606846981';
      const r = await callUnary<GrpcReply>(client, 'ModelInfer', {
        model_name: 'controls',
        inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1] }],
        outputs: [{ name: 'OUT_CORRID' }],
        raw_input_contents: [int32Bytes([1])],
        parameters: seqParams(id, true, true, 'int64_param'),
      });
      assert.equal(Buffer.from(r.raw_output_contents[0]).readBigUInt64LE(0), BigInt(id));
    });

    it("BAD REQUEST - no START and no id answer INVALID_ARGUMENT with Triton's words", async () => {
      await assert.rejects(
        callUnary(client, 'ModelInfer', request('acc', 1, seqParams(99, false, false, 'int64_param'))),
        (e: grpc.ServiceError) =>
          e.code === 3 &&
          /inference request for sequence 99 to model 'acc' must specify the START flag/.test(e.details),
      );
      await assert.rejects(
        callUnary(client, 'ModelInfer', request('acc', 1, {})),
        (e: grpc.ServiceError) => e.code === 3 && /must specify a non-zero or non-empty correlation ID/.test(e.details),
      );
      await assert.rejects(
        callUnary(client, 'ModelInfer', request('acc', 1, { sequence_id: { bool_param: true } })),
        (e: grpc.ServiceError) => e.code === 3 && /expected int64_param or string_param/.test(e.details),
      );
    });

    it('REGRESSION BAD REQUEST - sequence_id -1 was accepted (as 2^64-1): INVALID_ARGUMENT', async () => {
      await assert.rejects(
        callUnary(client, 'ModelInfer', request('acc', 1, seqParams(-1, true, true, 'int64_param'))),
        (e: grpc.ServiceError) =>
          e.code === 3 && /parameter 'sequence_id' must be an unsigned integer or a string, got "-1"/.test(e.details),
      );
    });
  });
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
