import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createLogger } from '../../src/core/logger.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';
import { makeTorchModels, pythonWithoutTorch, torchPython } from '../helpers/pytorch.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * TorchScript models (the pytorch backend, one engine process per model and device) through the real server over
 * HTTP and gRPC: Triton's naming rules both ways, dynamic batching, every parameter observed from inside the engine
 * process (its log line reads torch's own state back; the probe model reports inference and grad mode), strings,
 * BF16, and the faults: a model.pt that is not TorchScript, a config without inputs/outputs (and no config), a
 * config whose inputs do not match forward(), a forward() that raises, wrong dtype/shape, and a missing torch.
 */

interface Out {
  name: string;
  datatype: string;
  shape: number[];
  data: (number | string | boolean)[];
}
interface InferBody {
  error?: string;
  outputs?: Out[];
}

async function infer(url: string, model: string, body: unknown): Promise<{ status: number; body: InferBody }> {
  const res = await fetch(`${url}/v2/models/${model}/infer`, { method: 'POST', body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as InferBody };
}

const t = (name: string, datatype: string, shape: number[], data: unknown[]) => ({ name, datatype, shape, data });
const out = (b: InferBody, name: string): Out => {
  const o = b.outputs?.find((x) => x.name === name);
  assert.ok(o, `output ${name} in ${JSON.stringify(b)}`);
  return o;
};

const torch = torchPython();

describe('pytorch backend through the server', { skip: torch.missing }, () => {
  let s: TestServer;
  let models: string;
  const logs: string[] = [];
  before(async () => {
    models = makeTorchModels(torch.python);
    s = await startNereid({
      repositories: [models],
      exitOnError: false,
      backendConfig: new Map([['pytorch', torch.backendConfig]]),
      logger: createLogger({ write: (l) => void logs.push(l) }),
    });
  });
  after(() => s?.close());

  const state = (name: string) => s.server.repositoryIndex().find((r) => r.name === name);
  const logLines = (re: RegExp) => logs.filter((l) => re.test(l)).map((l) => (JSON.parse(l) as { msg: string }).msg);

  it('serves add_sub by INPUT__<i>/OUTPUT__<i> (outputs by index, not by their order in the config) over HTTP', async () => {
    const { status, body } = await infer(s.url, 'add_sub', {
      inputs: [t('INPUT__0', 'FP32', [1, 4], [1, 2, 3, 4]), t('INPUT__1', 'FP32', [1, 4], [10, 20, 30, 40])],
    });
    assert.equal(status, 200, body.error);
    assert.deepEqual(out(body, 'OUTPUT__0').data, [11, 22, 33, 44]);
    assert.deepEqual(out(body, 'OUTPUT__1').data, [-9, -18, -27, -36]);
  });

  it('serves add_sub over gRPC', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const input = (name: string, v: number[]) => ({
        name,
        datatype: 'FP32',
        shape: [1, 4],
        contents: { fp32_contents: v },
      });
      const res = await callUnary<{ raw_output_contents: Buffer[]; outputs: { name: string }[] }>(
        client,
        'ModelInfer',
        {
          model_name: 'add_sub',
          inputs: [input('INPUT__0', [1, 2, 3, 4]), input('INPUT__1', [1, 1, 1, 1])],
          outputs: [{ name: 'OUTPUT__1' }],
        },
      );
      assert.deepEqual(
        res.outputs.map((o) => o.name),
        ['OUTPUT__1'],
      );
      const raw = new Uint8Array(res.raw_output_contents[0]);
      assert.deepEqual([...new Float32Array(raw.buffer, raw.byteOffset, 4)], [0, 1, 2, 3]);
    } finally {
      client.close();
    }
  });

  it('maps inputs by forward() argument names, whatever their order in the config', async () => {
    const x = [1, 2, 3, 4];
    const y = [2, 2, 2, 2];
    const { status, body } = await infer(s.url, 'named_args', {
      inputs: [t('x', 'FP32', [1, 4], x), t('y', 'FP32', [1, 4], y)],
    });
    assert.equal(status, 200, body.error);
    assert.deepEqual(out(body, 'product').data, [0, 2, 4, 6]); // x * y - y
    assert.ok(logLines(/named_args_0 on cpu/).some((m) => m.includes('inputs by forward argument names')));
  });

  it('falls back to config order (with a warning) when names follow neither rule', async () => {
    const { status, body } = await infer(s.url, 'ordered', {
      inputs: [t('second', 'FP32', [2], [1, 1]), t('first', 'FP32', [2], [5, 7])],
    });
    assert.equal(status, 200, body.error);
    assert.deepEqual(out(body, 'difference').data, [4, 6]); // first - second
    assert.ok(logLines(/neither all forward\(\) arguments/).length > 0, 'the config-order fallback is warned about');
  });

  it('passes one Dict[str, Tensor] argument by config names', async () => {
    const { status, body } = await infer(s.url, 'dict_input', {
      inputs: [t('a', 'INT64', [3], [5, 6, 7]), t('b', 'INT64', [3], [1, 1, 1])],
    });
    assert.equal(status, 200, body.error);
    assert.deepEqual(out(body, 'OUTPUT__0').data, [4, 5, 6]);
  });

  it('joins concurrent requests into one forward() (dynamic batching) and splits the rows back', async () => {
    const before = (await (await fetch(`${s.url}/v2/models/add_sub/stats`)).json()) as {
      model_stats: { execution_count: number; inference_count: number }[];
    };
    const n = 8;
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        infer(s.url, 'add_sub', {
          inputs: [t('INPUT__0', 'FP32', [1, 4], [i, i, i, i]), t('INPUT__1', 'FP32', [1, 4], [1, 2, 3, 4])],
        }),
      ),
    );
    results.forEach(({ status, body }, i) => {
      assert.equal(status, 200, body.error);
      assert.deepEqual(out(body, 'OUTPUT__0').data, [i + 1, i + 2, i + 3, i + 4]);
    });
    const stats = (await (await fetch(`${s.url}/v2/models/add_sub/stats`)).json()) as typeof before;
    const execs = stats.model_stats[0].execution_count - before.model_stats[0].execution_count;
    const infers = stats.model_stats[0].inference_count - before.model_stats[0].inference_count;
    assert.equal(infers, n);
    assert.ok(execs < n, `${n} requests ran in ${execs} executions`);
  });

  it('applies every parameter: the engine reads torch back (threads, optimizer, jit, fuser, sharing, cleaning)', () => {
    const lines = logLines(/instance probe_\d on cpu/);
    assert.equal(lines.length, 2, lines.join('\n'));
    for (const m of lines) {
      assert.match(m, /intra-op threads 3, inter-op threads 2/);
      assert.match(m, /optimized execution off, inference mode on/);
      assert.match(m, /jit executor off, jit profiling off, tensor fuser off/);
      assert.match(m, /cache cleaning on \(no effect on the CPU\)/);
    }
    assert.ok(
      lines.some((m) => m.includes('weights shared with an earlier instance')),
      'the second instance reuses the first one’s module',
    );
    const defaults = logLines(/instance probe_defaults_\d on cpu/);
    assert.equal(defaults.length, 2);
    for (const m of defaults) {
      assert.match(m, /optimized execution on, inference mode off, jit executor on, jit profiling on/);
      assert.match(m, /weight sharing off/);
    }
  });

  it('runs forward() in inference mode with INFERENCE_MODE, else without grad', async () => {
    const probe = await infer(s.url, 'probe', { inputs: [t('INPUT__0', 'FP32', [2], [1, 2])] });
    assert.equal(probe.status, 200, probe.body.error);
    assert.deepEqual(out(probe.body, 'OUTPUT__0').data, [1, 0]); // is_inference, is_grad_enabled
    assert.deepEqual(out(probe.body, 'OUTPUT__1').data, [2, 4]);
    const plain = await infer(s.url, 'probe_defaults', { inputs: [t('INPUT__0', 'FP32', [2], [1, 2])] });
    assert.equal(plain.status, 200, plain.body.error);
    assert.deepEqual(out(plain.body, 'OUTPUT__0').data, [0, 0]);
  });

  it('passes TYPE_STRING as List[str] both ways', async () => {
    const { status, body } = await infer(s.url, 'strings', {
      inputs: [t('INPUT__0', 'BYTES', [3], ['ab', 'héllo', ''])],
    });
    assert.equal(status, 200, body.error);
    assert.deepEqual(out(body, 'OUTPUT__0').data, ['AB', 'HéLLO', '']); // TorchScript's upper() is ASCII-only; the UTF-8 survives
  });

  it('carries BF16 inputs', async () => {
    // 1.5 and -2 in bfloat16, as raw bits through the binary extension.
    const bits = new Uint16Array([0x3fc0, 0xc000]);
    const header = JSON.stringify({
      inputs: [{ name: 'INPUT__0', datatype: 'BF16', shape: [2], parameters: { binary_data_size: 4 } }],
      outputs: [{ name: 'OUTPUT__0', parameters: { binary_data: false } }],
    });
    const res = await fetch(`${s.url}/v2/models/bf16/infer`, {
      method: 'POST',
      headers: { 'Inference-Header-Content-Length': String(Buffer.byteLength(header)) },
      body: Buffer.concat([Buffer.from(header), Buffer.from(bits.buffer)]),
    });
    const body = (await res.json()) as InferBody;
    assert.equal(res.status, 200, body.error);
    assert.deepEqual(out(body, 'OUTPUT__0').data, [3, -4]);
  });

  it('BAD INPUT - a forward() that raises fails that request with its message; the instance serves on', async () => {
    const bad = await infer(s.url, 'raises', { inputs: [t('INPUT__0', 'FP32', [1, 2], [-1, -2])] });
    assert.equal(bad.status, 500);
    assert.match(bad.body.error ?? '', /model instance 'raises_0': forward\(\) failed: .*negative input/);
    const good = await infer(s.url, 'raises', { inputs: [t('INPUT__0', 'FP32', [1, 2], [1, 2])] });
    assert.equal(good.status, 200, good.body.error);
    assert.deepEqual(out(good.body, 'OUTPUT__0').data, [2, 3]);
  });

  it('BAD INPUT - wrong datatype or shape is refused before the model runs', async () => {
    const dtype = await infer(s.url, 'add_sub', {
      inputs: [t('INPUT__0', 'INT32', [1, 4], [1, 2, 3, 4]), t('INPUT__1', 'FP32', [1, 4], [1, 2, 3, 4])],
    });
    assert.equal(dtype.status, 400);
    assert.match(dtype.body.error ?? '', /INPUT__0/);
    const shape = await infer(s.url, 'add_sub', {
      inputs: [t('INPUT__0', 'FP32', [1, 3], [1, 2, 3]), t('INPUT__1', 'FP32', [1, 3], [1, 2, 3])],
    });
    assert.equal(shape.status, 400);
    assert.match(shape.body.error ?? '', /INPUT__0/);
  });

  it('BAD MODEL - a model.pt that is not TorchScript is UNAVAILABLE saying so', () => {
    const r = state('not_torchscript');
    assert.equal(r?.state, 'UNAVAILABLE');
    assert.match(r?.reason ?? '', /is not a TorchScript model .*torch\.jit\.script\(model\)\.save/);
  });

  it('BAD CONFIG - model.pt without config.pbtxt is picked up by the pytorch backend and asks for inputs/outputs', () => {
    const r = state('no_config');
    assert.equal(r?.state, 'UNAVAILABLE');
    assert.match(r?.reason ?? '', /TorchScript model's config cannot be auto-completed/);
    assert.match(r?.reason ?? '', /every input and every output with name, data_type and dims/);
    assert.match(r?.reason ?? '', /INPUT__0/);
  });

  it('BAD CONFIG - a config whose inputs do not match forward() names both', () => {
    const r = state('wrong_count');
    assert.equal(r?.state, 'UNAVAILABLE');
    assert.match(
      r?.reason ?? '',
      /declares 1 input\(s\) \[.INPUT__0.\], but forward\(\) takes 2 \(a: Tensor, b: Tensor\)/,
    );
  });
});

describe('pytorch backend without torch', { skip: torch.missing }, () => {
  it('BAD ENV - an interpreter without torch leaves the model UNAVAILABLE with how to install it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nereid-no-torch-'));
    const models = makeTorchModels(torch.python);
    const s = await startNereid({
      repositories: [models],
      exitOnError: false,
      backendConfig: new Map([['pytorch', { 'python-executable': pythonWithoutTorch(torch.python, dir) }]]),
    });
    try {
      const r = s.server.repositoryIndex().find((m) => m.name === 'add_sub');
      assert.equal(r?.state, 'UNAVAILABLE');
      assert.match(r?.reason ?? '', /PyTorch is not importable by .*: run 'bash scripts\/setup-python.sh --torch'/);
    } finally {
      await s.close();
    }
  });
});
