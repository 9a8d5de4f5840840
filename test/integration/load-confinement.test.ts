import assert from 'node:assert/strict';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { overrideRoot } from '../../src/repository/overrides.js';
import { buildModel, ELEM } from '../fixtures/onnx-builder.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

/**
 * Trust levels: what a load request brings (config override, `file:` entries) may name only paths inside the
 * model folder, and no answer to a client carries an absolute server path. Regression tests of the file read
 * through a load request (label_filename → /etc/passwd), the temp folders left by failed loads, and the 500 EEXIST
 * of `file:1` + `file:1/model.onnx`.
 */

const post = (url: string, body?: unknown): Promise<Response> =>
  fetch(url, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body) });

async function errorOf(res: Response): Promise<string> {
  return ((await res.json()) as { error: string }).error;
}

/** No absolute path of this machine: not the repository, not the temp folder, not the working folder. */
function assertNoServerPath(text: string, repo: string): void {
  for (const p of [repo, EXAMPLES, tmpdir(), process.cwd()]) {
    assert.ok(!text.includes(p), `'${p}' must not appear in: ${text}`);
  }
  assert.doesNotMatch(text, /(^|[\s'"(])\/[\w.-]+\/[\w.-]+/, `an absolute path in: ${text}`);
}

const classifierConfig = (labels: string): string =>
  JSON.stringify({
    name: 'classifier',
    platform: 'onnxruntime_onnx',
    max_batch_size: 8,
    input: [{ name: 'INPUT', data_type: 'TYPE_FP32', dims: [8] }],
    output: [{ name: 'PROBS', data_type: 'TYPE_FP32', dims: [5], label_filename: labels }],
  });

describe('Load requests stay inside the model folder', () => {
  let s: TestServer;
  let repo: string;
  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-confine-'));
    for (const m of ['classifier', 'simple']) await cp(join(EXAMPLES, m), join(repo, m), { recursive: true });
    // An operator's symlinks: one label file and one folder pointing out of the model folder.
    await symlink('/etc/passwd', join(repo, 'classifier', 'passwd-labels.txt'));
    await symlink('/etc', join(repo, 'classifier', 'etc'));
    await symlink(join(repo, 'nowhere'), join(repo, 'classifier', 'dangling.txt'));
    s = await startNereid({ repositories: [repo], modelControlMode: 'explicit', exitOnError: false });
  });
  after(async () => {
    await s.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('REGRESSION file read through a load request - label_filename outside the model folder is refused', async () => {
    for (const labels of [
      '/etc/passwd',
      '../../../../../../etc/passwd',
      'passwd-labels.txt',
      'etc/passwd',
      'dangling.txt',
      `../classifier/../../${'x'}`,
    ]) {
      const res = await post(`${s.url}/v2/repository/models/classifier/load`, {
        parameters: { config: classifierConfig(labels) },
      });
      assert.equal(res.status, 400, labels);
      const msg = await errorOf(res);
      assert.match(msg, /label_filename .* must stay within model directory/, labels);
      assertNoServerPath(msg, repo);
    }
    // Nothing was loaded: no classification can return the lines of /etc/passwd.
    assert.equal((await fetch(`${s.url}/v2/models/classifier/ready`)).status, 400);
    // A label file inside the folder loads, and classification uses it.
    const ok = await post(`${s.url}/v2/repository/models/classifier/load`, {
      parameters: { config: classifierConfig('labels.txt') },
    });
    assert.equal(ok.status, 200, await ok.clone().text());
    const infer = await post(`${s.url}/v2/models/classifier/infer`, {
      inputs: [{ name: 'INPUT', shape: [1, 8], datatype: 'FP32', data: [1, 2, 3, 4, 5, 6, 7, 8] }],
      outputs: [{ name: 'PROBS', parameters: { classification: 5 } }],
    });
    const body = (await infer.json()) as { outputs: { data: string[] }[] };
    assert.ok(body.outputs[0].data.every((d) => !d.includes('root:')));
  });

  it('REGRESSION any .onnx on disk could be loaded - default_model_filename and cc_model_filenames stay inside', async () => {
    const base = { name: 'simple', platform: 'onnxruntime_onnx', max_batch_size: 8 };
    for (const config of [
      { ...base, default_model_filename: '../../classifier/1/model.onnx' },
      { ...base, default_model_filename: '/usr/lib/x.onnx' },
      { ...base, cc_model_filenames: { '8.0': '../../../x.onnx' } },
    ]) {
      const res = await post(`${s.url}/v2/repository/models/simple/load`, {
        parameters: { config: JSON.stringify(config) },
      });
      assert.equal(res.status, 400, JSON.stringify(config));
      assert.match(await errorOf(res), /must stay within model directory/);
    }
  });

  it('REGRESSION file:1/libx.so.1 and accelerator library/cache paths in a load request - refused as code', async () => {
    const base = { name: 'simple', platform: 'onnxruntime_onnx', max_batch_size: 8 };
    const trt = (parameters: Record<string, string>) => ({
      ...base,
      optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'tensorrt', parameters }] } },
    });
    const requests: [Record<string, string>, RegExp][] = [
      [
        { config: JSON.stringify(base), 'file:1/libx.so.1': Buffer.from('x').toString('base64') },
        /file:1\/libx\.so\.1/,
      ],
      [{ config: JSON.stringify(trt({ trt_extra_plugin_lib_paths: '/tmp/evil.so' })) }, /trt_extra_plugin_lib_paths/],
      [{ config: JSON.stringify(trt({ trt_engine_cache_path: '/tmp/cache' })) }, /trt_engine_cache_path/],
    ];
    for (const [parameters, what] of requests) {
      const res = await post(`${s.url}/v2/repository/models/simple/load`, { parameters });
      assert.equal(res.status, 400, JSON.stringify(parameters));
      const error = await errorOf(res);
      assert.match(error, /carries code/);
      assert.match(error, what);
      assert.match(error, /--allow-code-in-load-requests/);
    }
  });

  it('BAD CALL - warm-up files, op libraries and backend/runtime library paths are refused', async () => {
    const base = { name: 'simple', platform: 'onnxruntime_onnx', max_batch_size: 8 };
    const cases: [object, RegExp][] = [
      [
        {
          ...base,
          model_warmup: [
            {
              name: 'w',
              batch_size: 1,
              inputs: { INPUT0: { data_type: 'TYPE_INT32', dims: [16], input_data_file: '../../../etc/passwd' } },
            },
          ],
        },
        /input_data_file .* must stay within model directory/,
      ],
      [
        { ...base, model_operations: { op_library_filename: ['/tmp/evil.so'] } },
        /op_library_filename(.* absolute path|\); Nereid runs code sent in load requests only when started with --allow-code-in-load-requests)/,
      ],
      [{ ...base, runtime: '../../evil.so' }, /backend library name '..\/..\/evil.so' escapes backend directory/],
      [{ ...base, backend: 'a/b' }, /escapes backend directory/],
    ];
    for (const [config, message] of cases) {
      const res = await post(`${s.url}/v2/repository/models/simple/load`, {
        parameters: { config: JSON.stringify(config) },
      });
      assert.equal(res.status, 400, JSON.stringify(config));
      assert.match(await errorOf(res), message);
    }
  });

  it('BAD CALL - an ONNX file sent as file: whose external data leaves the folder is refused before onnxruntime opens it', async () => {
    const config = JSON.stringify({ name: 'ext', backend: 'onnxruntime', max_batch_size: 0 });
    for (const location of ['../../../../etc/passwd', '/etc/passwd', '../../sibling.bin']) {
      const model = buildModel({
        inputs: [{ name: 'X', elemType: ELEM.FLOAT, dims: [4] }],
        outputs: [{ name: 'Y', elemType: ELEM.FLOAT, dims: [4] }],
        initializers: [{ name: 'W', elemType: ELEM.FLOAT, dims: [4], data: new Float32Array(4), external: location }],
        nodes: [{ op: 'Add', inputs: ['X', 'W'], outputs: ['Y'] }],
      });
      const res = await post(`${s.url}/v2/repository/models/ext/load`, {
        parameters: { config, 'file:1/model.onnx': Buffer.from(model).toString('base64') },
      });
      assert.equal(res.status, 400, location);
      const msg = await errorOf(res);
      assert.match(msg, /external data .* must stay within model directory/, location);
      assertNoServerPath(msg, repo);
    }
  });

  it('an ONNX file with its external data beside it loads and serves', async () => {
    const weights = new Float32Array([10, 20, 30, 40]);
    const model = buildModel({
      inputs: [{ name: 'X', elemType: ELEM.FLOAT, dims: [4] }],
      outputs: [{ name: 'Y', elemType: ELEM.FLOAT, dims: [4] }],
      initializers: [{ name: 'W', elemType: ELEM.FLOAT, dims: [4], data: weights, external: 'weights.bin' }],
      nodes: [{ op: 'Add', inputs: ['X', 'W'], outputs: ['Y'] }],
    });
    const res = await post(`${s.url}/v2/repository/models/ext/load`, {
      parameters: {
        config: JSON.stringify({ name: 'ext', backend: 'onnxruntime', max_batch_size: 0 }),
        'file:1/model.onnx': Buffer.from(model).toString('base64'),
        'file:1/weights.bin': Buffer.from(weights.buffer).toString('base64'),
      },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const out = await post(`${s.url}/v2/models/ext/infer`, {
      inputs: [{ name: 'X', shape: [4], datatype: 'FP32', data: [1, 1, 1, 1] }],
    });
    assert.deepEqual(((await out.json()) as { outputs: { data: number[] }[] }).outputs[0].data, [11, 21, 31, 41]);
    assert.equal((await post(`${s.url}/v2/repository/models/ext/unload`)).status, 200);
  });

  it('REGRESSION file:1 with file:1/model.onnx - a clean 400, no EEXIST, no temp path', async () => {
    const onnx = await readFile(join(EXAMPLES, 'simple', '1', 'model.onnx'));
    const res = await post(`${s.url}/v2/repository/models/clash/load`, {
      parameters: {
        config: JSON.stringify({ name: 'clash', backend: 'onnxruntime', max_batch_size: 8 }),
        'file:1': 'AAAA',
        'file:1/model.onnx': onnx.toString('base64'),
      },
    });
    assert.equal(res.status, 400);
    const msg = await errorOf(res);
    assert.match(msg, /'file:1\/model.onnx' needs '1' to be a folder/);
    assert.doesNotMatch(msg, /EEXIST|nereid-overrides/);
  });

  it('REGRESSION absolute paths in load errors and the repository index - paths are relative to the repository', async () => {
    // A model folder whose config names a model file that is not there: the loader's reason names the file.
    await mkdir(join(repo, 'broken', '1'), { recursive: true });
    await writeFile(
      join(repo, 'broken', 'config.pbtxt'),
      'name: "broken"\nbackend: "onnxruntime"\nmax_batch_size: 0\ndefault_model_filename: "missing.onnx"\ninput [{ name: "X" data_type: TYPE_FP32 dims: [1] }]\noutput [{ name: "Y" data_type: TYPE_FP32 dims: [1] }]\n',
    );
    const res = await post(`${s.url}/v2/repository/models/broken/load`);
    assert.equal(res.status, 400);
    const msg = await errorOf(res);
    assert.match(msg, /broken\/1\/missing\.onnx/);
    assertNoServerPath(msg, repo);
    const index = await (await post(`${s.url}/v2/repository/index`)).text();
    assert.match(index, /broken\/1\/missing\.onnx/);
    assertNoServerPath(index, repo);
    // The same for a model sent as file: entries (its folder is a temp folder).
    const onnx = await readFile(join(EXAMPLES, 'simple', '1', 'model.onnx'));
    const upload = await post(`${s.url}/v2/repository/models/up/load`, {
      parameters: {
        config: JSON.stringify({
          name: 'up',
          backend: 'onnxruntime',
          max_batch_size: 8,
          default_model_filename: 'x.onnx',
        }),
        'file:1/model.onnx': onnx.toString('base64'),
      },
    });
    assert.equal(upload.status, 400);
    const upMsg = await errorOf(upload);
    assert.match(upMsg, /up\/1\/x\.onnx/);
    assertNoServerPath(upMsg, repo);
  });

  it('REGRESSION temp folders pile up - a failed file: load leaves no folder behind', async () => {
    const root = await overrideRoot();
    const before = await readdir(root);
    // A well-formed ONNX file onnxruntime refuses (an unknown operator), padded to 1 MiB with a raw initializer.
    const junk = buildModel({
      inputs: [{ name: 'X', elemType: ELEM.FLOAT, dims: [4] }],
      outputs: [{ name: 'Y', elemType: ELEM.FLOAT, dims: [4] }],
      initializers: [{ name: 'P', elemType: ELEM.FLOAT, dims: [1 << 18], data: new Float32Array(1 << 18) }],
      nodes: [{ op: 'NoSuchOperator', inputs: ['X', 'P'], outputs: ['Y'] }],
    });
    for (let i = 0; i < 5; i++) {
      const res = await post(`${s.url}/v2/repository/models/junk/load`, {
        parameters: {
          config: JSON.stringify({ name: 'junk', backend: 'onnxruntime', max_batch_size: 0 }),
          'file:1/model.onnx': Buffer.from(junk).toString('base64'),
        },
      });
      assert.equal(res.status, 400, await res.clone().text());
      assert.match(await errorOf(res), /load failed for model 'junk'/);
    }
    const refused = await post(`${s.url}/v2/repository/models/junk/load`, {
      parameters: {
        config: classifierConfig('/etc/passwd').replace('classifier', 'junk'),
        'file:1/model.onnx': 'AAAA',
      },
    });
    assert.equal(refused.status, 400);
    assert.deepEqual(await readdir(root), before, 'no override folder left');
  });
});

describe('Override folders of stopped servers', () => {
  it('are swept at start-up; those of live processes are left alone', async () => {
    const dead = join(tmpdir(), 'nereid-overrides-999999999-test');
    const live = join(tmpdir(), `nereid-overrides-1-test${process.pid}`); // pid 1 always runs
    await mkdir(join(dead, 'load-x', 'm', '1'), { recursive: true });
    await mkdir(live, { recursive: true });
    const s = await startNereid({ allowGrpc: false, allowMetrics: false });
    try {
      await assert.rejects(stat(dead), /ENOENT/);
      assert.ok((await stat(live)).isDirectory());
    } finally {
      await s.close();
      await rm(live, { recursive: true, force: true });
    }
  });
});
