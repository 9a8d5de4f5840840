/**
 * Issue 26 item 8: redacting server paths from what clients see never damages a message. An ONNX node name
 * (torch.onnx.export writes `/encoder/layer.0/Reshape`) reaches the client whole, over HTTP and gRPC; and
 * `nereid model check`, which runs on the user's own machine, prints its reasons with the user's own paths.
 */
import assert from 'node:assert/strict';
import type * as grpc from '@grpc/grpc-js';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { ELEM, writeModel } from '../fixtures/onnx-builder.js';
import { callUnary, fp32Bytes, inferenceClient, startTestGrpcServer } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';
import type { RunningGrpcServer } from '../../src/protocol/grpc/server.js';

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const NODE = '/encoder/layer.0/Reshape';

/** X [n] reshaped to SHAPE by a node named like torch.onnx.export's: a SHAPE that does not fit fails the run. */
async function writeReshaper(dir: string): Promise<void> {
  await mkdir(join(dir, 'reshaper', '1'), { recursive: true });
  await writeModel(join(dir, 'reshaper', '1', 'model.onnx'), {
    inputs: [
      { name: 'X', elemType: ELEM.FLOAT, dims: ['n'] },
      { name: 'SHAPE', elemType: ELEM.INT64, dims: [2] },
    ],
    outputs: [{ name: 'Y', elemType: ELEM.FLOAT, dims: ['a', 'b'] }],
    nodes: [{ op: 'Reshape', name: NODE, inputs: ['X', 'SHAPE'], outputs: ['Y'] }],
  });
}

describe('redaction never damages a message', () => {
  let root: string;
  let s: TestServer;
  let grpcServer: RunningGrpcServer;
  let client: grpc.Client;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'nereid-redact-'));
    await writeReshaper(root);
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

  it("BAD CALL - a run error names the ONNX node whole (HTTP and gRPC), not '…/Reshape'", async () => {
    const res = await fetch(`${s.url}/v2/models/reshaper/infer`, {
      method: 'POST',
      body: JSON.stringify({
        inputs: [
          { name: 'X', shape: [4], datatype: 'FP32', data: [1, 2, 3, 4] },
          { name: 'SHAPE', shape: [2], datatype: 'INT64', data: [3, 7] },
        ],
      }),
    });
    const body = (await res.json()) as { error: string };
    assert.notEqual(res.status, 200);
    assert.ok(body.error.includes(`'${NODE}'`), body.error);
    assert.doesNotMatch(body.error, /…/);
    await assert.rejects(
      callUnary(client, 'ModelInfer', {
        model_name: 'reshaper',
        inputs: [
          { name: 'X', datatype: 'FP32', shape: [4] },
          { name: 'SHAPE', datatype: 'INT64', shape: [2] },
        ],
        raw_input_contents: [fp32Bytes([1, 2, 3, 4]), Buffer.from(new BigInt64Array([3n, 7n]).buffer)],
      }),
      (e: grpc.ServiceError) => {
        assert.ok(e.details.includes(`'${NODE}'`), e.details);
        assert.doesNotMatch(e.details, /…/);
        return true;
      },
    );
  });

  it("BAD MODEL - nereid model check prints the user's own paths, unredacted", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-check-paths-'));
    try {
      await mkdir(join(dir, 'broken', '1'), { recursive: true });
      await writeFile(join(dir, 'broken', '1', 'model.onnx'), 'not an onnx file');
      const child = spawn(
        process.execPath,
        ['--conditions=nereid-source', '--import', 'tsx', MAIN, 'model', 'check', join(dir, 'broken')],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d));
      const [code] = (await once(child, 'exit')) as [number | null];
      assert.equal(code, 1, stderr);
      // The model file as the user knows it, not the check's temporary repository or a redacted '…/model.onnx'.
      assert.ok(stderr.includes(join(dir, 'broken', '1', 'model.onnx')), stderr);
      assert.doesNotMatch(stderr, /…|nereid-model-check-/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
