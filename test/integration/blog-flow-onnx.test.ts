/**
 * Issue 26 item 11: the blog's flow (seed 001) on ONNX. torch.onnx.export writes a BERT-style model whose token
 * inputs are INT64 with a dynamic batch dim; served with no config.pbtxt, auto-complete chooses max_batch_size 4
 * (Triton's default-max-batch-size). The blog's client sends a batch of 8 as INT32.
 * - batch 8: Triton's "batch-size must be <= 4", plus that the 4 was auto-completed and how to raise it;
 * - INT32 data for INT64 inputs: Triton refuses it (core infer_request.cc compares the request's datatype with the
 *   config's and answers INVALID_ARG; nothing converts), so Nereid does too, in Triton's words, and says so.
 */
import assert from 'node:assert/strict';
import type * as grpc from '@grpc/grpc-js';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { RunningGrpcServer } from '../../src/protocol/grpc/server.js';
import { ELEM, writeModel, type GraphSpec } from '../fixtures/onnx-builder.js';
import { callUnary, inferenceClient, int32Bytes, startTestGrpcServer } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

const NAMES = ['input_ids', 'attention_mask', 'token_type_ids'] as const;
const SEQ = 8;

/** The blog's signature: three INT64 [batch_size, seq] token inputs, one output. */
function bertLike(): GraphSpec {
  return {
    inputs: NAMES.map((name) => ({ name, elemType: ELEM.INT64, dims: ['batch_size', 'seq'] })),
    outputs: [{ name: 'outputs', elemType: ELEM.INT64, dims: ['batch_size', 'seq'] }],
    nodes: [
      { op: 'Add', inputs: ['input_ids', 'attention_mask'], outputs: ['t'] },
      { op: 'Add', inputs: ['t', 'token_type_ids'], outputs: ['outputs'] },
    ],
  };
}

function httpBody(batch: number, datatype: 'INT32' | 'INT64'): string {
  return JSON.stringify({
    inputs: NAMES.map((name) => ({ name, shape: [batch, SEQ], datatype, data: Array(batch * SEQ).fill(1) })),
  });
}

function grpcRequest(model: string, batch: number, datatype: 'INT32' | 'INT64'): Record<string, unknown> {
  const n = batch * SEQ;
  const bytes = datatype === 'INT32' ? int32Bytes(Array(n).fill(1)) : Buffer.from(new BigInt64Array(n).fill(1n).buffer);
  return {
    model_name: model,
    inputs: NAMES.map((name) => ({ name, datatype, shape: [batch, SEQ] })),
    raw_input_contents: NAMES.map(() => bytes),
  };
}

describe("the blog's flow on ONNX (auto-completed max_batch_size, INT32 client of INT64 inputs)", () => {
  let root: string;
  let s: TestServer;
  let grpcServer: RunningGrpcServer;
  let client: grpc.Client;
  const post = async (model: string, body: string): Promise<{ status: number; error: string }> => {
    const res = await fetch(`${s.url}/v2/models/${model}/infer`, { method: 'POST', body });
    const json = (await res.json()) as { error?: string };
    return { status: res.status, error: json.error ?? '' };
  };

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'nereid-blog-'));
    for (const m of ['bert', 'bert_configured']) {
      await mkdir(join(root, m, '1'), { recursive: true });
      await writeModel(join(root, m, '1', 'model.onnx'), bertLike());
    }
    // The same model with max_batch_size written by the user: no note about auto-complete.
    await writeFile(join(root, 'bert_configured', 'config.pbtxt'), 'backend: "onnxruntime"\nmax_batch_size: 4\n');
    s = await startNereid({ repositories: [root] });
    grpcServer = await startTestGrpcServer(s);
    client = inferenceClient(`127.0.0.1:${grpcServer.port}`);
  });
  after(async () => {
    client?.close();
    await grpcServer?.close(1000);
    await s?.close();
    await rm(root, { recursive: true, force: true });
  });

  it('serves batches up to the auto-completed 4 as INT64', async () => {
    assert.equal((await post('bert', httpBody(4, 'INT64'))).status, 200);
    const cfg = (await (await fetch(`${s.url}/v2/models/bert/config`)).json()) as { max_batch_size: number };
    assert.equal(cfg.max_batch_size, 4);
  });

  it('BAD CALL - batch 8 over an auto-completed max_batch_size says it was auto-completed and how to raise it', async () => {
    const r = await post('bert', httpBody(8, 'INT64'));
    assert.equal(r.status, 400);
    assert.match(r.error, /^inference request batch-size must be <= 4 for 'bert'/);
    assert.match(r.error, /max_batch_size 4 was auto-completed/);
    assert.match(r.error, /set max_batch_size in config\.pbtxt/);
    assert.match(r.error, /--backend-config=onnxruntime,default-max-batch-size=N/);
    await assert.rejects(callUnary(client, 'ModelInfer', grpcRequest('bert', 8, 'INT64')), (e: grpc.ServiceError) => {
      assert.equal(e.code, 3); // INVALID_ARGUMENT
      assert.match(e.details, /batch-size must be <= 4 for 'bert'.*was auto-completed.*default-max-batch-size/);
      return true;
    });
    // A max_batch_size the user wrote: Triton's message alone.
    const own = await post('bert_configured', httpBody(8, 'INT64'));
    assert.equal(own.status, 400);
    assert.equal(own.error, "inference request batch-size must be <= 4 for 'bert_configured'");
  });

  it("BAD CALL - the blog's INT32 client of INT64 inputs is refused as Triton refuses it, saying nothing converts", async () => {
    const r = await post('bert', httpBody(2, 'INT32'));
    assert.equal(r.status, 400);
    assert.match(r.error, /^inference input 'input_ids' data-type is 'INT32', but model 'bert' expects 'INT64'/);
    assert.match(r.error, /not converted \(Triton does not either\): send 'input_ids' as INT64/);
    await assert.rejects(callUnary(client, 'ModelInfer', grpcRequest('bert', 2, 'INT32')), (e: grpc.ServiceError) => {
      assert.equal(e.code, 3);
      assert.match(e.details, /data-type is 'INT32', but model 'bert' expects 'INT64'; inputs are not converted/);
      return true;
    });
  });
});
