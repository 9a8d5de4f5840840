import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { accumulatorModel, controlsEchoModel, ELEM, writeModel } from '../fixtures/onnx-builder.js';
import { startNereid, type TestServer } from './server.js';

/**
 * The models and calls of the sequence batcher's tests (test/integration/sequence*.test.ts): ONNX models made here
 * with implicit state and controls (onnxruntime in engine threads), and identity models with latency for slots,
 * backlog and timeouts; HTTP requests carrying the sequence parameters.
 */

const controls = (kinds: [string, string][]): string =>
  kinds.map(([name, kind]) => `{ name: "${name}" control [{ kind: ${kind} int32_false_true: [ 0, 1 ] }] }`).join(',');
export const START_END_READY = controls([
  ['START', 'CONTROL_SEQUENCE_START'],
  ['END', 'CONTROL_SEQUENCE_END'],
  ['READY', 'CONTROL_SEQUENCE_READY'],
]);
export const STATE = `state [{ input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] }]`;
export const accIo = `input [{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }]
output [{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }]`;
const identIo = `input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]`;
const delay = (ms: number): string => `parameters { key: "execute_delay_ms" value { string_value: "${ms}" } }`;
const one = 'instance_group [{ count: 1 kind: KIND_CPU }]';

interface ModelSpec {
  config: string;
  onnx?: Parameters<typeof writeModel>[1];
}

const MODELS = {
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
} satisfies Record<string, ModelSpec>;

export interface Reply {
  status: number;
  body: { error?: string; outputs?: { name: string; datatype: string; shape: number[]; data: (number | boolean)[] }[] };
}

export async function infer(
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
export const out = (r: Reply, name?: string): (number | boolean)[] => {
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const o = name === undefined ? r.body.outputs?.[0] : r.body.outputs?.find((x) => x.name === name);
  return o?.data ?? [];
};

/** Sends `values` as one sequence, one request after the other; returns the first element of each OUTPUT. */
export async function sequence(url: string, model: string, id: number | string, values: number[], shape?: number[]) {
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

export const cumulative = (xs: number[], from = 0): number[] =>
  xs.map((_, i) => xs.slice(0, i + 1).reduce((a, b) => a + b, from));

export async function batchSizes(url: string, model: string): Promise<Record<number, number>> {
  const res = await fetch(`${url}/v2/models/${model}/stats`);
  const s = (
    (await res.json()) as { model_stats: { batch_stats: { batch_size: number; compute_infer: { count: number } }[] }[] }
  ).model_stats[0];
  return Object.fromEntries(s.batch_stats.map((b) => [b.batch_size, b.compute_infer.count]));
}

export type SequenceModel = keyof typeof MODELS;

/** A server over a fresh repository holding the named models of MODELS; `close` also removes the repository. */
export async function startSequenceServer(names: SequenceModel[]): Promise<TestServer> {
  const repo = await mkdtemp(join(tmpdir(), 'nereid-seq-'));
  for (const name of names) {
    const m: ModelSpec = MODELS[name];
    await mkdir(join(repo, name, '1'), { recursive: true });
    await writeFile(join(repo, name, 'config.pbtxt'), m.config);
    if (m.onnx) await writeModel(join(repo, name, '1', 'model.onnx'), m.onnx);
  }
  if (names.includes('acc_init')) {
    await mkdir(join(repo, 'acc_init', 'initial_state'));
    await writeFile(join(repo, 'acc_init', 'initial_state', 'hundred.bin'), Buffer.from(Int32Array.of(100).buffer));
  }
  const s = await startNereid({ repositories: [repo] });
  return {
    ...s,
    close: async () => {
      await s.close();
      await rm(repo, { recursive: true, force: true });
    },
  };
}
