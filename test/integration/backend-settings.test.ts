import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { defaultBackends } from '../../src/backends/index.js';
import { checkModelParameters } from '../../src/backends/settings.js';
import { parseModelConfigOrThrow } from '../../src/config/index.js';
import { createLogger } from '../../src/core/logger.js';
import { parseBackendConfig } from '../../src/cli/backend-config-flag.js';
import { EXAMPLES, startNereid } from '../helpers/server.js';

/**
 * Issue 26 items 1 and 2: `--backend-config` in Triton's one-setting form and seed 000's several-settings form,
 * every backend's settings checked at start-up (before any model loads) with "did you mean" for an unknown backend
 * or key; model parameters checked by one rule for every backend; unknown accelerator options named with the
 * nearest one.
 */

/** A repository with the example `simple` model whose config gets `extra` appended. */
async function simpleWith(extra: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'nereid-settings-'));
  await cp(join(EXAMPLES, 'simple'), join(dir, 'simple'), { recursive: true });
  const cfg = join(dir, 'simple', 'config.pbtxt');
  await writeFile(cfg, `${await readFile(cfg, 'utf8')}\n${extra}\n`);
  return dir;
}

/** An empty repository: start-up checks run, and no model load could report the setting instead. */
let empty: string;
before(async () => {
  empty = await mkdtemp(join(tmpdir(), 'nereid-settings-empty-'));
});
after(() => rm(empty, { recursive: true, force: true }));

const start = (backendConfig: string[], repositories = [empty], logger?: ReturnType<typeof createLogger>) =>
  startNereid({ repositories, backendConfig: parseBackendConfig(backendConfig), allowGrpc: false, logger });

describe('--backend-config at start-up', () => {
  it("takes seed 000's tensorrt line verbatim and checks each of its settings at start-up", async () => {
    const seed =
      'tensorrt,coalesce-request-input=true,plugins="/path/plugin1.so;/path2/plugin2.so,version-compatible=true"';
    const srv = await start([seed]);
    await srv.close();
    // A bad value in the flag's last setting fails start-up naming it, though no tensorrt model is loaded (it was
    // glued onto the first setting's value before, and nothing read it).
    await assert.rejects(
      start(['tensorrt,coalesce-request-input=true,plugins="/a.so;/b.so",version-compatible=maybe']),
      /--backend-config=tensorrt,version-compatible=maybe: expected true or false/,
    );
    await assert.rejects(start(['tensorrt,plugins=relative.so']), /'relative.so' is not an absolute path/);
  });

  it('BAD CALL - an unknown backend or key fails start-up with the nearest name', async () => {
    await assert.rejects(
      start(['onnx,default-max-batch-size=8']),
      /unknown backend 'onnx'; did you mean 'onnxruntime'\?/,
    );
    await assert.rejects(
      start(['onnxrt,default-max-batch-size=8']),
      /unknown backend 'onnxrt'; did you mean 'onnxruntime'\?/,
    );
    await assert.rejects(start(['tensorrtt,plugins=/a.so']), /unknown backend 'tensorrtt'; did you mean 'tensorrt'\?/);
    await assert.rejects(
      start(['torch,python-executable=/usr/bin/python3']),
      /unknown backend 'torch'; did you mean 'pytorch'\?/,
    );
    await assert.rejects(
      start(['onnxruntime,enable-global-threadpol=1']),
      /--backend-config=onnxruntime,enable-global-threadpol: unknown setting; did you mean 'enable-global-threadpool'\?/,
    );
    await assert.rejects(
      start(['python,stub-timeout-secs=5']),
      /python,stub-timeout-secs: unknown setting; did you mean 'stub-timeout-seconds'\?/,
    );
    await assert.rejects(start(['pytorch,python-exectuable=/usr/bin/python3']), /did you mean 'python-executable'\?/);
    await assert.rejects(
      start(['onnxruntime,intra_op_thread_count=many']),
      /intra_op_thread_count: expected an integer/,
    );
  });

  it("applies Triton's global form (no backend name) to the backends that read it", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-settings-dmbs-'));
    await cp(join(EXAMPLES, 'simple', '1'), join(dir, 'auto', '1'), { recursive: true });
    const srv = await start(['default-max-batch-size=2'], [dir]);
    try {
      const cfg = (await (await fetch(`${srv.url}/v2/models/auto/config`)).json()) as { max_batch_size: number };
      assert.equal(cfg.max_batch_size, 2);
    } finally {
      await srv.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('model parameters: one rule for every backend', () => {
  const backends = defaultBackends();
  after(() => Promise.all(backends.map(async (b) => b.close?.())));
  const byName = (n: string) => backends.find((b) => b.name === n) as (typeof backends)[number];
  const config = (params: Record<string, string>) =>
    parseModelConfigOrThrow(
      Object.entries(params)
        .map(([k, v]) => `parameters { key: "${k}" value { string_value: "${v}" } }`)
        .join('\n'),
      'config.pbtxt',
    );

  it('BAD CALL - a near miss of a key an onnxruntime, pytorch or tensorrt model reads fails with the key', () => {
    for (const [backend, key, want] of [
      ['onnxruntime', 'intra_op_threads_count', 'intra_op_thread_count'],
      ['pytorch', 'intra_op_thread_count', 'INTRA_OP_THREAD_COUNT'],
      ['tensorrt', 'execution_context_allocation_stratgy', 'execution_context_allocation_strategy'],
    ]) {
      assert.throws(
        () => checkModelParameters(config({ [key]: '1' }), byName(backend), 'm'),
        new RegExp(`parameter '${key}' is not one the ${backend} backend reads; did you mean '${want}'\\?`),
      );
    }
  });

  it("warns once for other unknown keys, notes keys Triton reads and Nereid ignores, never checks python's", () => {
    const lines = checkModelParameters(config({ my_label: 'x', DISABLE_CUDNN: 'true' }), byName('pytorch'), 'm');
    assert.equal(lines.warnings.length, 1);
    assert.match(lines.warnings[0], /parameter 'my_label' is not read by the pytorch backend/);
    assert.equal(lines.notes.length, 1);
    assert.match(lines.notes[0], /'DISABLE_CUDNN' is accepted and has no effect in Nereid/);
    const shared = checkModelParameters(config({ max_sequence_backlog: '4' }), byName('onnxruntime'), 'm', [
      'max_sequence_backlog',
    ]);
    assert.deepEqual(shared, { warnings: [], notes: [] }, "the sequence batcher's key is read for every backend");
    assert.deepEqual(checkModelParameters(config({ intra_op_threads_count: '1' }), byName('python'), 'm'), {
      warnings: [],
      notes: [],
    });
  });

  it('a loading onnxruntime model: a near miss fails its load, another key is one warning', async () => {
    const dir = await simpleWith('parameters { key: "intra_op_threads_count" value { string_value: "2" } }');
    const srv = await start([], [dir]).catch((e: Error) => e);
    await rm(dir, { recursive: true, force: true });
    assert.ok(srv instanceof Error);
    assert.match(
      srv.message,
      /parameter 'intra_op_threads_count' is not one the onnxruntime backend reads; did you mean 'intra_op_thread_count'\?/,
    );

    const logs: string[] = [];
    const dir2 = await simpleWith('parameters { key: "my_tag" value { string_value: "a" } }');
    const ok = await start([], [dir2], createLogger({ write: (l) => logs.push(l) }));
    await ok.close();
    await rm(dir2, { recursive: true, force: true });
    assert.equal(logs.filter((l) => l.includes("parameter 'my_tag' is not read")).length, 1);
  });

  it('BAD CALL - an unknown accelerator or accelerator option names the nearest one', async () => {
    for (const [accel, want] of [
      ['{ name: "openvin" }', /unknown Execution Accelerator 'openvin' .*; did you mean 'openvino'\?/],
      [
        '{ name: "openvino" parameters { key: "num_of_thread" value: "2" } }',
        /unknown parameter 'num_of_thread' .*; did you mean 'num_of_threads'\?/,
      ],
    ] as const) {
      const dir = await simpleWith(
        `optimization { execution_accelerators { cpu_execution_accelerator [ ${accel} ] } }`,
      );
      const err = await start([], [dir]).catch((e: Error) => e);
      await rm(dir, { recursive: true, force: true });
      assert.ok(err instanceof Error);
      assert.match(err.message, want);
    }
  });
});
