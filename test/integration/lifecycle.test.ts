import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, rm, writeFile, mkdir, access } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

const post = (url: string, body?: unknown): Promise<Response> =>
  fetch(url, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body) });

async function errorOf(res: Response): Promise<string> {
  return ((await res.json()) as { error: string }).error;
}

async function inferSimple(url: string, model = 'simple'): Promise<Response> {
  const data = Array.from({ length: 16 }, (_, i) => i);
  return post(`${url}/v2/models/${model}/infer`, {
    inputs: [
      { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data },
      { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data },
    ],
  });
}

async function copyModel(root: string, from: string, to: string, versions = [1]): Promise<void> {
  await mkdir(join(root, to), { recursive: true });
  for (const v of versions) await cp(join(EXAMPLES, from, '1'), join(root, to, String(v)), { recursive: true });
  const cfg = await readFile(join(EXAMPLES, from, 'config.pbtxt'), 'utf8');
  await writeFile(join(root, to, 'config.pbtxt'), cfg.replace(`name: "${from}"`, `name: "${to}"`));
}

describe('Model control mode explicit', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({ modelControlMode: 'explicit' });
  });
  after(() => s.close());

  it('loads nothing at start; the index lists the repository models by name', async () => {
    const res = await post(`${s.url}/v2/repository/index`);
    const rows = (await res.json()) as { name: string; state?: string }[];
    assert.deepEqual(
      rows.map((r) => r.name),
      ['classifier', 'simple', 'text_encoder'],
    );
    assert.ok(
      rows.every((r) => !r.state),
      'not loaded: no state',
    );
    assert.equal((await inferSimple(s.url)).status, 404);
    assert.equal((await fetch(`${s.url}/v2/health/ready`)).status, 200, 'nothing loaded is not "not ready"');
  });

  it('loads, serves, unloads; requests after the unload get 404', async () => {
    assert.equal((await post(`${s.url}/v2/repository/models/simple/load`)).status, 200);
    assert.equal((await fetch(`${s.url}/v2/models/simple/ready`)).status, 200);
    assert.equal((await inferSimple(s.url)).status, 200);
    assert.equal((await post(`${s.url}/v2/repository/models/simple/unload`)).status, 200);
    const res = await inferSimple(s.url);
    assert.equal(res.status, 404);
    const rows = (await (await post(`${s.url}/v2/repository/index`)).json()) as {
      name: string;
      state: string;
      reason: string;
    }[];
    assert.deepEqual(
      rows.find((r) => r.name === 'simple'),
      { name: 'simple', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' },
    );
  });

  it('applies a JSON config override given with the load', async () => {
    const base = await readFile(join(EXAMPLES, 'simple', 'config.pbtxt'), 'utf8');
    assert.ok(base.includes('max_batch_size: 8'));
    const override = {
      name: 'simple',
      platform: 'onnxruntime_onnx',
      max_batch_size: 2,
      input: [
        { name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] },
        { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] },
      ],
      output: [
        { name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] },
        { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] },
      ],
    };
    const res = await post(`${s.url}/v2/repository/models/simple/load`, {
      parameters: { config: JSON.stringify(override) },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const served = (await (await fetch(`${s.url}/v2/models/simple/config`)).json()) as { max_batch_size: number };
    assert.equal(served.max_batch_size, 2);
  });

  it('loads a model sent entirely as file overrides (base64), under a new name', async () => {
    const onnx = await readFile(join(EXAMPLES, 'simple', '1', 'model.onnx'));
    const config = JSON.stringify({ name: 'uploaded', backend: 'onnxruntime', max_batch_size: 8 });
    const res = await post(`${s.url}/v2/repository/models/uploaded/load`, {
      parameters: { config, 'file:1/model.onnx': onnx.toString('base64') },
    });
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal((await inferSimple(s.url, 'uploaded')).status, 200);
    assert.equal((await post(`${s.url}/v2/repository/models/uploaded/unload`)).status, 200);
  });

  it('BAD CALL - load of an unknown model is 500 naming it; the server stays healthy', async () => {
    const res = await post(`${s.url}/v2/repository/models/nope/load`);
    assert.equal(res.status, 500);
    assert.match(await errorOf(res), /failed to load 'nope'/);
    assert.equal((await fetch(`${s.url}/v2/health/live`)).status, 200);
  });

  it('BAD CALL - model names that climb out of the repository are 400', async () => {
    // Sent with node:http: fetch would normalize '..' segments away before they reach the server.
    for (const name of ['..', '%2E%2E', 'a%2F..%2Fb', '%20']) {
      const status = await new Promise<number>((resolve, reject) => {
        const { hostname, port } = new URL(s.url);
        const path = `/v2/repository/models/${name}/load`;
        const req = request({ hostname, port, path, method: 'POST' }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
      assert.equal(status, 400, name);
    }
  });

  it('BAD CALL - a malformed config override is 400 and names the problem', async () => {
    const bad = await post(`${s.url}/v2/repository/models/simple/load`, {
      parameters: { config: '{"max_batch_size": "x"' },
    });
    assert.equal(bad.status, 400);
    const unknown = await post(`${s.url}/v2/repository/models/simple/load`, {
      parameters: { config: JSON.stringify({ name: 'simple', max_batch_sise: 2 }) },
    });
    assert.equal(unknown.status, 400);
    assert.match(await errorOf(unknown), /max_batch_sise/);
  });

  it('BAD CALL - file overrides that escape the model folder are refused and nothing is written', async () => {
    const marker = `nereid-escape-${process.pid}`;
    const config = JSON.stringify({ name: 'evil', backend: 'onnxruntime' });
    for (const path of [
      `../${marker}`,
      `1/../../${marker}`,
      `/tmp/${marker}`,
      `1\\..\\..\\${marker}`,
      `${'a'.repeat(300)}/x`,
    ]) {
      const res = await post(`${s.url}/v2/repository/models/evil/load`, {
        parameters: { config, [`file:${path}`]: 'AAAA' },
      });
      assert.equal(res.status, 400, path);
      assert.match(await errorOf(res), /must stay within model directory/);
    }
    await assert.rejects(access(join(tmpdir(), marker)));
  });

  it('BAD CALL - file overrides without a config are 400', async () => {
    const res = await post(`${s.url}/v2/repository/models/simple/load`, {
      parameters: { 'file:1/model.onnx': 'AAAA' },
    });
    assert.equal(res.status, 400);
  });

  it('BAD CALL - a load whose model fails is 400 "load failed" and the previous load keeps serving', async () => {
    assert.equal((await post(`${s.url}/v2/repository/models/simple/load`)).status, 200);
    const res = await post(`${s.url}/v2/repository/models/simple/load`, {
      parameters: {
        config: JSON.stringify({
          name: 'simple',
          backend: 'onnxruntime',
          max_batch_size: 8,
          instance_group: [{ kind: 'KIND_GPU' }],
        }),
      },
    });
    assert.equal(res.status, 400);
    assert.match(await errorOf(res), /load failed for model 'simple'/);
    assert.equal((await inferSimple(s.url)).status, 200, 'old load still serving');
  });

  it('BAD CALL - unload of an unknown model is 404', async () => {
    const res = await post(`${s.url}/v2/repository/models/nope/unload`);
    assert.equal(res.status, 404);
  });
});

describe('Model control mode none', () => {
  it('BAD CALL - load and unload are refused with 503', async () => {
    const s = await startNereid();
    try {
      const res = await post(`${s.url}/v2/repository/models/simple/load`);
      assert.equal(res.status, 503);
      assert.equal(await errorOf(res), 'explicit model load / unload is not allowed if polling is enabled');
      assert.equal((await post(`${s.url}/v2/repository/models/simple/unload`)).status, 503);
    } finally {
      await s.close();
    }
  });

  it('BAD CALL - --load-model outside explicit mode fails start-up', async () => {
    await assert.rejects(
      startNereid({ loadModels: ['simple'] }),
      /--load-model can only be used with --model-control-mode=explicit/,
    );
  });
});

describe('Model control mode explicit with --load-model', () => {
  it('loads only the named models at start', async () => {
    const s = await startNereid({ modelControlMode: 'explicit', loadModels: ['simple'] });
    try {
      assert.equal((await fetch(`${s.url}/v2/models/simple/ready`)).status, 200);
      assert.equal((await fetch(`${s.url}/v2/models/classifier/ready`)).status, 400);
    } finally {
      await s.close();
    }
  });
});

describe('Model control mode poll', () => {
  let s: TestServer;
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'nereid-poll-'));
    await copyModel(root, 'simple', 'simple');
    s = await startNereid({ repositories: [root], modelControlMode: 'poll', repositoryPollSecs: 3600 });
  });
  after(async () => {
    await s.close();
    await rm(root, { recursive: true, force: true });
  });
  const poll = (): Promise<unknown> => s.server.pollRepository();

  it('adds a new model folder', async () => {
    await copyModel(root, 'simple', 'added');
    await poll();
    assert.equal((await inferSimple(s.url, 'added')).status, 200);
  });

  it('adds a new version and serves it as latest', async () => {
    await cp(join(EXAMPLES, 'simple', '1'), join(root, 'simple', '2'), { recursive: true });
    await poll();
    const meta = (await (await fetch(`${s.url}/v2/models/simple`)).json()) as { versions: string[] };
    assert.deepEqual(meta.versions, ['2']);
    const res = await inferSimple(s.url);
    assert.equal(((await res.json()) as { model_version: string }).model_version, '2');
  });

  it('BAD CONFIG - a config change that breaks the model leaves the old one serving, with the reason reported', async () => {
    const file = join(root, 'simple', 'config.pbtxt');
    const good = await readFile(file, 'utf8');
    await writeFile(file, good.replace('max_batch_size: 8', 'max_batch_size: 8\nmax_batch_sise: 4'));
    await poll();
    assert.equal((await inferSimple(s.url)).status, 200, 'old model still serves');
    const rows = (await (await post(`${s.url}/v2/repository/index`)).json()) as {
      name: string;
      reason: string;
      state: string;
    }[];
    const row = rows.find((r) => r.name === 'simple');
    assert.equal(row?.state, 'READY');
    const model = s.server.models().find((m) => m.name === 'simple');
    assert.match(model?.reason ?? '', /reload failed.*max_batch_sise/s);
    // Fixing it reloads it.
    await writeFile(file, good.replace('max_batch_size: 8', 'max_batch_size: 4'));
    await poll();
    const cfg = (await (await fetch(`${s.url}/v2/models/simple/config`)).json()) as { max_batch_size: number };
    assert.equal(cfg.max_batch_size, 4);
  });

  it('removes a model whose folder is gone', async () => {
    await rm(join(root, 'added'), { recursive: true });
    await poll();
    assert.equal((await inferSimple(s.url, 'added')).status, 404);
  });

  it('BAD CALL - explicit load is refused while polling', async () => {
    const res = await post(`${s.url}/v2/repository/models/simple/load`);
    assert.equal(res.status, 503);
    assert.match(await errorOf(res), /not allowed if polling is enabled/);
  });
});
