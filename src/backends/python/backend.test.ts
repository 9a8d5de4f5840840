import assert from 'node:assert/strict';
import { cp, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CancelledError, InternalError, InvalidArgError, NereidError, UnavailableError } from '../../core/errors.js';
import type { Tensor } from '../../core/tensor.js';
import type { EngineResponse } from '../contract.js';
import {
  EXAMPLES,
  FIXTURES,
  fixtureConfig,
  fp32,
  trackedLoads,
  outputOf,
  recorder,
  request,
} from '../../../test/helpers/python-models.js';
import { ROOT } from '../runtime/process/python-env.js';
import { noopLogger } from '../../core/logger.js';
import { join } from 'node:path';

/**
 * The python backend's model process: execute, faults in model code, cancellation and destroy, and the
 * interpreter's configuration. Decoupled models, BLS and auto_complete_config: backend-api.test.ts.
 */

const never = new AbortController().signal;
const load = trackedLoads();

const params = (mode: string) => ({ parameters: { mode } });
const x4 = () => fp32('INPUT0', [1, 2, 3, 4]);
const isError = (r: EngineResponse | Error | null | undefined): r is Error => r instanceof Error;

describe('python backend: execute', () => {
  it('adds and subtracts (add_sub example), outputs in the order the request asks', async () => {
    const m = await load('add_sub', { dir: EXAMPLES });
    const inst = await m.instance();
    const r = recorder();
    const timings = await inst.execute(
      [request([fp32('INPUT0', [1, 2, 3, 4]), fp32('INPUT1', [10, 20, 30, 40])], ['OUTPUT1', 'OUTPUT0'])],
      r,
      never,
    );
    const resp = r.finals().get(0);
    assert.deepEqual([...(outputOf(resp, 'OUTPUT0').data as Float32Array)], [11, 22, 33, 44]);
    assert.deepEqual([...(outputOf(resp, 'OUTPUT1').data as Float32Array)], [-9, -18, -27, -36]);
    assert.deepEqual(
      (resp as EngineResponse).outputs.map((o) => o.name),
      ['OUTPUT1', 'OUTPUT0'],
    );
    assert.ok(timings.computeInferNs > 0 && timings.computeInputNs > 0);
    await inst.destroy();
  });

  it('runs a batch of requests with one response each, in order', async () => {
    const m = await load('identity');
    const inst = await m.instance();
    const r = recorder();
    const reqs = [0, 1, 2].map((i) => request([fp32('INPUT0', [i, i + 0.5], [1, 2])], ['OUTPUT0']));
    await inst.execute(reqs, r, never);
    assert.equal(r.sent.length, 3);
    for (let i = 0; i < 3; i++) {
      const out = outputOf(r.finals().get(i), 'OUTPUT0');
      assert.deepEqual(out.shape, [1, 2]);
      assert.deepEqual([...(out.data as Float32Array)], [i, i + 0.5]);
    }
  });

  it('moves tensors larger than the first segment (shm growth), every datatype intact', async () => {
    const m = await load('identity', {
      backendConfig: { 'shm-default-byte-size': '4096', 'shm-growth-byte-size': '4096' },
    });
    const inst = await m.instance();
    const n = 300_000; // 1.2 MB of FP32 > 4 KiB segments
    const values = Float32Array.from({ length: n }, (_, i) => i * 0.25);
    const r = recorder();
    await inst.execute(
      [request([{ name: 'INPUT0', datatype: 'FP32', shape: [1, n], data: values }], ['OUTPUT0'])],
      r,
      never,
    );
    assert.deepEqual(outputOf(r.finals().get(0), 'OUTPUT0').data, values);
    // Again: the grown segments are reused, nothing is lost between calls.
    const r2 = recorder();
    await inst.execute([request([fp32('INPUT0', [7], [1, 1])], ['OUTPUT0'])], r2, never);
    assert.deepEqual([...(outputOf(r2.finals().get(0), 'OUTPUT0').data as Float32Array)], [7]);
  });

  it('passes request id, correlation id and parameters to the model, and BYTES both ways', async () => {
    const m = await load('echo_meta');
    const inst = await m.instance();
    const r = recorder();
    const text: Tensor = {
      name: 'TEXT',
      datatype: 'BYTES',
      shape: [3],
      data: [Buffer.from('héllo'), Buffer.from([0, 1, 2]), Buffer.alloc(0)],
    };
    await inst.execute(
      [request([text], ['META', 'TEXT_OUT'], { id: 'req-7', correlationId: 42n, parameters: { k: 'v', n: 3 } })],
      r,
      never,
    );
    const resp = r.finals().get(0);
    const meta = JSON.parse(Buffer.from((outputOf(resp, 'META').data as Uint8Array[])[0]).toString());
    assert.deepEqual(meta, { id: 'req-7', corr: 42, params: { k: 'v', n: 3 }, outputs: ['META', 'TEXT_OUT'] });
    const echoed = outputOf(resp, 'TEXT_OUT').data as Uint8Array[];
    assert.deepEqual(
      echoed.map((b) => Buffer.from(b).toString('hex')),
      ['68c3a96c6c6f', '000102', ''],
    );
  });
});

describe('python backend: faults in model code', () => {
  it('BAD MODEL - initialize() raising fails the instance with the traceback last line', async () => {
    const m = await load('init_raises');
    await assert.rejects(m.instance(), (e: NereidError) => {
      assert.match(e.message, /initialize\(\) failed: RuntimeError: weights not found under .*init_raises/);
      return true;
    });
  });

  it('BAD MODEL - execute() raising fails that batch with its message and the instance serves on', async () => {
    const m = await load('faulty');
    const inst = await m.instance();
    await assert.rejects(
      inst.execute([request([x4()], ['OUTPUT0'], params('raise'))], recorder(), never),
      (e: NereidError) => {
        assert.ok(e instanceof InternalError);
        assert.match(
          e.message,
          /^Failed to process the request\(s\) for model instance 'faulty_0', message: ValueError: boom from execute/,
        );
        assert.match(e.message, /model\.py\(\d+\): execute/);
        return true;
      },
    );
    const r = recorder();
    await inst.execute([request([x4()], ['OUTPUT0'])], r, never);
    assert.deepEqual([...(outputOf(r.finals().get(0), 'OUTPUT0').data as Float32Array)], [1, 2, 3, 4]);
  });

  it('BAD MODEL - a wrong number of responses, or not a list, fails the batch', async () => {
    const m = await load('faulty');
    const inst = await m.instance();
    await assert.rejects(
      inst.execute([request([x4()], ['OUTPUT0'], params('count'))], recorder(), never),
      /Number of InferenceResponse objects do not match the number of InferenceRequest objects/,
    );
    await assert.rejects(
      inst.execute([request([x4()], ['OUTPUT0'], params('not_list'))], recorder(), never),
      /Expected a list in the execute return, found type 'str'/,
    );
    const r = recorder();
    await inst.execute([request([x4()], ['OUTPUT0'], params('none'))], r, never);
    assert.match(String(r.finals().get(0)), /execute\(\) returned None but sent no final response for request 0/);
  });

  it('BAD MODEL - wrong dtype, wrong shape or a missing output fail only that request', async () => {
    const m = await load('faulty');
    const inst = await m.instance();
    const r = recorder();
    await inst.execute(
      ['dtype', 'shape', 'missing', 'ok', 'error'].map((mode) => request([x4()], ['OUTPUT0'], params(mode))),
      r,
      never,
    );
    const f = r.finals();
    assert.match(String(f.get(0)), /returned output 'OUTPUT0' as FP64, but the config declares TYPE_FP32/);
    assert.match(String(f.get(1)), /returned output 'OUTPUT0' with shape \[8\], but the config expects \[4\]/);
    assert.match(String(f.get(2)), /did not return requested output 'OUTPUT0' \(it returned \[\]\)/);
    assert.ok(!isError(f.get(3)));
    assert.ok(f.get(4) instanceof InvalidArgError, 'a TritonError keeps its code');
    assert.equal((f.get(4) as Error).message, 'bad request');
  });

  it('BAD MODEL - sys.exit() in execute kills the instance: the batch fails INTERNAL naming it, died settles', async () => {
    const m = await load('faulty');
    const inst = await m.instance();
    const pid = inst.pid;
    await assert.rejects(
      inst.execute([request([x4()], ['OUTPUT0'], params('exit'))], recorder(), never),
      (e: Error) => {
        assert.ok(e instanceof InternalError);
        assert.equal(e.message, `instance faulty_0 (python process ${pid}) exited with code 3`);
        return true;
      },
    );
    assert.equal((await inst.died).message, `instance faulty_0 (python process ${pid}) exited with code 3`);
    await assert.rejects(inst.execute([request([x4()], ['OUTPUT0'])], recorder(), never), /exited with code 3/);
    await inst.destroy();
  });

  it('BAD MODEL - a segfault (ctypes) reports the signal', async () => {
    const m = await load('faulty');
    const inst = await m.instance();
    await assert.rejects(
      inst.execute([request([x4()], ['OUTPUT0'], params('segv'))], recorder(), never),
      new RegExp(`^InternalError: instance faulty_0 \\(python process ${inst.pid}\\) exited with signal SIGSEGV$`),
    );
    assert.match((await inst.died).message, /exited with signal SIGSEGV/);
  });

  it('BAD MODEL - an execute past the deadline is killed, its batch fails, died settles', async () => {
    const m = await load('faulty');
    const inst = await m.instance();
    const t0 = Date.now();
    await assert.rejects(
      inst.execute([request([x4()], ['OUTPUT0'], params('hang'))], recorder(), never),
      /^InternalError: instance faulty_0 \(python process \d+\) did not return from execute within 2 s and was killed$/,
    );
    // Not killed before its 2 s deadline; that it was killed at all (not left hanging) is what the host's message
    // above says. No upper wall-clock bound: a loaded machine may take any time to deliver the kill.
    const took = Date.now() - t0;
    assert.ok(took >= 2000, `killed after ${took} ms, before its deadline`);
    assert.match((await inst.died).message, /did not return from execute within 2 s/);
  });

  it('a process killed from outside (SIGKILL) mid-request fails the request and settles died', async () => {
    const m = await load('cancellable');
    const inst = await m.instance();
    const running = inst.execute([request([x4()], ['OUTPUT0'])], recorder(), never);
    await sleep(200);
    process.kill(inst.pid, 'SIGKILL');
    await assert.rejects(
      running,
      new RegExp(`instance cancellable_0 \\(python process ${inst.pid}\\) exited with signal SIGKILL`),
    );
    assert.match((await inst.died).message, /SIGKILL/);
  });
});

describe('python backend: cancellation and destroy', () => {
  it('forwards the execute signal: request.is_cancelled() turns true in Python', async () => {
    const m = await load('cancellable');
    const inst = await m.instance();
    const ctl = new AbortController();
    const r = recorder();
    const running = inst.execute([request([x4()], ['OUTPUT0'])], r, ctl.signal);
    await sleep(300);
    ctl.abort();
    await running;
    // Python's own answer (the model answers this once is_cancelled() is true; else it works 10 s and succeeds).
    const final = r.finals().get(0);
    assert.ok(final instanceof CancelledError);
    assert.match(final.message, /cancelled by the client/);
  });

  it('destroy() finalizes and ends the process; execute afterwards is refused', async () => {
    const m = await load('add_sub', { dir: EXAMPLES });
    const inst = await m.instance();
    const pid = inst.pid;
    await inst.destroy();
    await inst.destroy(); // idempotent
    assert.throws(() => process.kill(pid, 0), /ESRCH/);
    await assert.rejects(inst.execute([request([x4()], ['OUTPUT0'])], recorder(), never), UnavailableError);
    // A destroyed instance never reports itself as died.
    const settled = await Promise.race([inst.died.then(() => 'died'), sleep(100).then(() => 'pending')]);
    assert.equal(settled, 'pending');
  });

  it('destroy() waits for the batch in flight', async () => {
    const m = await load('cancellable');
    const inst = await m.instance();
    const ctl = new AbortController();
    const r = recorder();
    const running = inst.execute([request([x4()], ['OUTPUT0'])], r, ctl.signal);
    const destroyed = inst.destroy();
    await sleep(100);
    ctl.abort();
    await running;
    await destroyed;
    assert.ok(r.finals().get(0) instanceof CancelledError);
  });

  it('several instances of a model run in separate processes', async () => {
    const m = await load('identity');
    const [a, b] = await Promise.all([m.instance(0), m.instance(1)]);
    assert.notEqual(a.pid, b.pid);
    const ra = recorder();
    const rb = recorder();
    await Promise.all([
      a.execute([request([fp32('INPUT0', [1], [1, 1])], ['OUTPUT0'])], ra, never),
      b.execute([request([fp32('INPUT0', [2], [1, 1])], ['OUTPUT0'])], rb, never),
    ]);
    assert.deepEqual([...(outputOf(ra.finals().get(0), 'OUTPUT0').data as Float32Array)], [1]);
    assert.deepEqual([...(outputOf(rb.finals().get(0), 'OUTPUT0').data as Float32Array)], [2]);
  });
});

describe('python backend: configuration', () => {
  it('BAD CONFIG - an unknown backend-config key fails the load, naming the known ones', async () => {
    await assert.rejects(
      load('identity', { backendConfig: { 'shm-size': '1' } }),
      /unknown key; the python backend knows shm-default-byte-size/,
    );
  });

  it('BAD CONFIG - an interpreter that does not exist fails the instance clearly', async () => {
    const m = await load('identity', { backendConfig: { 'python-executable': '/nonexistent/python3' } });
    await assert.rejects(m.instance(), /cannot start python process '\/nonexistent\/python3'/);
  });

  it('BAD CONFIG - an interpreter without numpy says how to fix it', async () => {
    const m = await load('identity', { backendConfig: { 'python-executable': '/usr/bin/python3' } });
    await assert.rejects(m.instance(), /has no numpy: run 'bash scripts\/setup-python.sh'/);
  });

  it('runs the model on the interpreter of EXECUTION_ENV_PATH ($$TRITON_MODEL_DIRECTORY form, a directory)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-env-'));
    try {
      await cp(join(FIXTURES, 'identity'), join(dir, 'identity'), { recursive: true });
      await symlink(join(ROOT, '.venv'), join(dir, 'identity', 'python_env'));
      const config = fixtureConfig(join(FIXTURES, 'identity'));
      config.parameters = { EXECUTION_ENV_PATH: { string_value: '$$TRITON_MODEL_DIRECTORY/python_env' } };
      const lines: string[] = [];
      const logger = {
        ...noopLogger,
        info: (o: unknown, m?: string) => lines.push(String(m ?? o)),
        child: () => logger,
      };
      const m = await load('identity', { dir, config, logger });
      const inst = await m.instance();
      const r = recorder();
      await inst.execute([request([fp32('INPUT0', [5], [1, 1])], ['OUTPUT0'])], r, never);
      assert.deepEqual([...(outputOf(r.finals().get(0), 'OUTPUT0').data as Float32Array)], [5]);
      assert.ok(
        lines.some((l) => l.includes(join(dir, 'identity', 'python_env', 'bin')) && l.includes('EXECUTION_ENV_PATH')),
        `the log says which interpreter runs the model: ${lines.join(' | ')}`,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('BAD CONFIG - EXECUTION_ENV_PATH may not escape the model directory', async () => {
    const config = fixtureConfig(join(FIXTURES, 'identity'));
    config.parameters = { EXECUTION_ENV_PATH: { string_value: '$$TRITON_MODEL_DIRECTORY/../../env' } };
    await assert.rejects(load('identity', { config }), /EXECUTION_ENV_PATH '.*' escapes the model directory/);
  });
});
