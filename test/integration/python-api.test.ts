import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startNereid, type TestServer } from '../helpers/server.js';
import { FIXTURES } from '../helpers/python-models.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';

/**
 * triton_python_backend_utils APIs that Triton's own example models reach (issue 27 items 1-3), each used by a model
 * of ours in test/fixtures/python and driven through the real server over HTTP and gRPC.
 */

interface InferBody {
  error?: string;
  outputs?: { name: string; data: unknown[]; datatype: string; shape: number[] }[];
}

export async function httpInfer(
  url: string,
  model: string,
  body: unknown,
): Promise<{ status: number; body: InferBody }> {
  const res = await fetch(`${url}/v2/models/${model}/infer`, { method: 'POST', body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as InferBody };
}

const int32In = { inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [1] }] };

describe('python backend API parity (pb_utils)', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({ repositories: [FIXTURES], exitOnError: false });
  });
  after(() => s?.close());

  it('using_decoupled_model_transaction_policy reads the model config (HTTP)', async () => {
    const { status, body } = await httpInfer(s.url, 'policy_probe', int32In);
    assert.equal(status, 200, body.error);
    assert.deepEqual(body.outputs?.[0].data, [false]);
    // The decoupled one answers through its response sender: HTTP's streaming endpoint.
    const res = await fetch(`${s.url}/v2/models/policy_probe_decoupled/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ IN: [1] }),
    });
    assert.equal(res.status, 200);
    const events = (await res.text()).split('\n\n').filter((e) => e.startsWith('data: '));
    assert.deepEqual(
      events.map((e) => (JSON.parse(e.slice(6)) as { DECOUPLED: unknown }).DECOUPLED),
      [true],
    );
  });

  it('using_decoupled_model_transaction_policy reads the model config (gRPC)', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const res = await callUnary<{ raw_output_contents: Buffer[] }>(client, 'ModelInfer', {
        model_name: 'policy_probe',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], contents: { int_contents: [1] } }],
      });
      assert.deepEqual([...res.raw_output_contents[0]], [0]);
    } finally {
      client.close();
    }
  });
});
