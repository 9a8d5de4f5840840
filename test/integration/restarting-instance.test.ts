import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { callUnary, fp32Bytes, inferenceClient } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * A model whose only instance is restarting (its python process died) is one the repository has but cannot serve
 * now: every request for it, by latest or by version, over HTTP and gRPC, is UNAVAILABLE (503) with the reason,
 * never NOT_FOUND; a model the repository does not have stays NOT_FOUND. The window is held open, not timed: the
 * model's initialize waits while a `hold` file exists in its folder, so the restarted instance cannot be ready
 * until the test removes it.
 */

const MODEL_PY = `import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        folder = args["model_repository"]
        with open(os.path.join(folder, "inits"), "a") as f:
            f.write("%d\\n" % os.getpid())
        while os.path.exists(os.path.join(folder, "hold")):
            time.sleep(0.02)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy())]) for r in requests]
`;
const CONFIG = `backend: "python" max_batch_size: 0
  input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }] output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }]
  instance_group [{ count: 1 kind: KIND_CPU }]`;

const body = JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [2], datatype: 'FP32', data: [1, 2] }] });
async function infer(url: string, path: string): Promise<{ status: number; error?: string }> {
  const r = await fetch(`${url}${path}/infer`, { method: 'POST', body });
  return { status: r.status, error: ((await r.json()) as { error?: string }).error };
}
const grpcInfer = (client: grpc.Client, model: string, version = '') =>
  callUnary(client, 'ModelInfer', {
    model_name: model,
    model_version: version,
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2] }],
    raw_input_contents: [fp32Bytes([1, 2])],
  }).then(
    () => ({ code: grpc.status.OK, details: '' }),
    (e: grpc.ServiceError) => ({ code: e.code, details: e.details }),
  );

/** Waits (bounded) until `ok()` holds; what the server or the model observed decides, not a time. */
async function until(ok: () => Promise<boolean> | boolean, what: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (await ok()) return;
    await sleep(25);
  }
  assert.fail(`never observed: ${what}`);
}

describe('a model whose instance is restarting', () => {
  let repo: string;
  let dir: string;
  let s: TestServer;
  let client: grpc.Client;
  const inits = async () => (await readFile(join(dir, 'inits'), 'utf8').catch(() => '')).split('\n').filter(Boolean);

  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-restarting-'));
    dir = join(repo, 'gated');
    await mkdir(join(dir, '1'), { recursive: true });
    await writeFile(join(dir, 'config.pbtxt'), CONFIG);
    await writeFile(join(dir, '1', 'model.py'), MODEL_PY);
    s = await startNereid({ repositories: [repo] });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client?.close();
    await rm(join(dir, 'hold'), { force: true });
    await s?.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('answers UNAVAILABLE with the reason while it restarts (HTTP 503, gRPC UNAVAILABLE), and serves again after', async () => {
    assert.equal((await infer(s.url, '/v2/models/gated')).status, 200);
    const [instance] =
      s.server
        .models()
        .find((m) => m.name === 'gated')
        ?.versions.get(1)?.pool?.instances ?? [];
    const pid = (instance as unknown as { pid: number }).pid;

    await writeFile(join(dir, 'hold'), '');
    process.kill(pid, 'SIGKILL');
    // The replacement process is in its initialize (held): the server saw the death and cannot serve.
    await until(async () => (await inits()).length === 2, 'the restarted instance initializing');
    assert.equal((await fetch(`${s.url}/v2/models/gated/ready`)).status, 400);

    const why = /no healthy instance \(instance gated_0: .*exited with signal SIGKILL; restarting\)/;
    for (const path of ['/v2/models/gated', '/v2/models/gated/versions/1']) {
      const r = await infer(s.url, path);
      assert.equal(r.status, 503, `${path}: ${r.error}`);
      assert.match(r.error ?? '', why, path);
      assert.doesNotMatch(r.error ?? '', /not found|no available versions/, path);
    }
    for (const version of ['', '1']) {
      const g = await grpcInfer(client, 'gated', version);
      assert.equal(g.code, grpc.status.UNAVAILABLE, `version '${version}': ${g.details}`);
      assert.match(g.details, why);
    }
    // A model the repository does not have is still not found.
    assert.equal((await infer(s.url, '/v2/models/absent')).status, 404);
    assert.equal((await grpcInfer(client, 'absent')).code, grpc.status.NOT_FOUND);

    await rm(join(dir, 'hold'));
    await until(async () => (await fetch(`${s.url}/v2/models/gated/ready`)).status === 200, 'READY again');
    assert.equal((await infer(s.url, '/v2/models/gated')).status, 200);
    assert.equal((await grpcInfer(client, 'gated')).code, grpc.status.OK);
    assert.ok(!existsSync(join(dir, 'hold')));
  });
});
