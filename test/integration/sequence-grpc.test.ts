import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import { callUnary, inferenceClient, int32Bytes, int32Of } from '../helpers/grpc.js';
import { startSequenceServer } from '../helpers/sequence.js';
import { type TestServer } from '../helpers/server.js';

/**
 * The sequence batcher over gRPC: the sequence parameters as InferParameter (int64 and string ids, a uint64 id
 * beyond 2^53 passed exactly to CORRID), and the refusals as INVALID_ARGUMENT with Triton's words.
 */

describe('sequence batcher over gRPC', () => {
  let s: TestServer;
  let client: grpc.Client;

  before(async () => {
    s = await startSequenceServer(['acc', 'controls']);
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client?.close();
    await s?.close();
  });

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
        e.code === 3 && /inference request for sequence 99 to model 'acc' must specify the START flag/.test(e.details),
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
