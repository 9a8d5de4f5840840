import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { noopLogger } from '../../../core/logger.js';
import type { EngineResponse } from '../../contract.js';
import { FIXTURES, fp32, outputOf, recorder, request } from '../../../../test/helpers/python-models.js';
import { resolveInterpreter } from '../../python/interpreter.js';
import { childEnv } from './python-env.js';
import { DEFAULTS } from '../../python/options.js';
import { BlockAllocator } from './allocator.js';
import { ChildProcessHost } from './child.js';
import { FrameDecoder, encodeFrame } from './frame.js';
import { ProcessInstance } from './instance.js';
import { SHM_DIR } from './shm.js';

describe('BlockAllocator', () => {
  it('allocates first fit and merges neighbouring holes on free', () => {
    const a = new BlockAllocator(256);
    assert.deepEqual([a.alloc(64), a.alloc(64), a.alloc(64)], [0, 64, 128]);
    assert.equal(a.alloc(128), -1);
    a.free(64);
    a.free(0);
    assert.equal(a.alloc(128), 0, 'the two freed blocks merged');
    a.free(128);
    a.free(0);
    assert.equal(a.alloc(256), 0, 'everything merged back');
    assert.equal(a.free(12345), false, 'an unknown block is ignored');
  });
});

describe('FrameDecoder', () => {
  it('reassembles frames split anywhere and several in one chunk', () => {
    const bytes = Buffer.concat([encodeFrame({ op: 'a', s: 'é' }), encodeFrame({ op: 'b' }), encodeFrame({ op: 'c' })]);
    const d = new FrameDecoder();
    const got: unknown[] = [];
    for (let i = 0; i < bytes.length; i += 3) got.push(...d.push(bytes.subarray(i, i + 3)));
    assert.deepEqual(got, [{ op: 'a', s: 'é' }, { op: 'b' }, { op: 'c' }]);
  });

  it('BAD INPUT - refuses a frame length beyond the limit', () => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(0xffffffff);
    assert.throws(() => new FrameDecoder().push(b), /exceeds/);
  });
});

describe('ChildProcessHost', () => {
  const start = async (prefix: string) => {
    const interp = await resolveInterpreter({}, FIXTURES, { ...DEFAULTS, pythonExecutable: undefined });
    return ChildProcessHost.start({
      kind: 'python process',
      command: interp.executable,
      args: ['-m', 'nereid_python'],
      env: childEnv(),
      shm: { prefix, defaultByteSize: 1 << 16, growthByteSize: 1 << 16 },
      startTimeoutMs: 30_000,
      logger: noopLogger,
    });
  };
  const payload = (name: string) => ({
    instance_name: name,
    model_path: join(FIXTURES, 'identity', '1', 'model.py'),
    decoupled: false,
    args: { model_config: '{}', model_name: 'identity' },
  });

  it('hosts several instances in one process (one per GPU, for TensorRT), each with its own messages', async () => {
    const prefix = `nereid_test_${process.pid}_multi_`;
    const host = await start(prefix);
    const opts = (name: string) => ({
      name,
      payload: payload(name),
      decoupled: false,
      executeTimeoutMs: 0,
      destroyGraceMs: 5000,
      ownsProcess: false,
      logger: noopLogger,
    });
    const [a, b] = await Promise.all([
      ProcessInstance.create(host, opts('m_0')),
      ProcessInstance.create(host, opts('m_1')),
    ]);
    assert.equal(a.pid, b.pid);
    const ra = recorder();
    const rb = recorder();
    const never = new AbortController().signal;
    await Promise.all([
      a.execute([request([fp32('INPUT0', [1, 2])], ['OUTPUT0'])], ra, never),
      b.execute([request([fp32('INPUT0', [3])], ['OUTPUT0'])], rb, never),
    ]);
    assert.deepEqual([...(outputOf(ra.finals().get(0), 'OUTPUT0').data as Float32Array)], [1, 2]);
    assert.deepEqual([...(outputOf(rb.finals().get(0), 'OUTPUT0').data as Float32Array)], [3]);
    await a.destroy();
    assert.ok(host.alive, 'the process stays while it hosts an instance');
    const rb2 = recorder();
    await b.execute([request([fp32('INPUT0', [4])], ['OUTPUT0'])], rb2, never);
    await b.destroy();
    await host.exited;
    assert.ok(!existsSync(join(SHM_DIR, `${prefix}h0`)), 'segments are removed with the process');
  });

  it('gets every shared-memory block back: no growth over many requests', async () => {
    const host = await start(`nereid_test_${process.pid}_leak_`);
    const inst = await ProcessInstance.create(host, {
      name: 'm_0',
      payload: payload('m_0'),
      decoupled: false,
      executeTimeoutMs: 0,
      destroyGraceMs: 5000,
      ownsProcess: true,
      logger: noopLogger,
    });
    const never = new AbortController().signal;
    const big = Array.from({ length: 4000 }, (_, i) => i);
    for (let i = 0; i < 300; i++) {
      const r = recorder();
      await inst.execute([request([fp32('INPUT0', i % 2 ? big : [i])], ['OUTPUT0'])], r, never);
      assert.equal((outputOf(r.finals().get(0), 'OUTPUT0').data as Float32Array)[0], i % 2 ? 0 : i);
    }
    const usage = host.arena.usage();
    assert.equal(usage.used, 0, 'every input block was handed back');
    assert.equal(usage.segments, 1, 'no segment was added after the first');
    await inst.destroy();
  });

  describe('outputs lent to requests that take views (viewsOk)', () => {
    const N = 20_000; // 80 KB of FP32: above LEND_MIN_BYTES, so the block is lent rather than copied
    const values = (k: number) => Array.from({ length: N }, (_, i) => k * 1e5 + i);
    const make = async (tag: string) => {
      const host = await start(`nereid_test_${process.pid}_lend_${tag}_`);
      const inst = await ProcessInstance.create(host, {
        name: 'm_0',
        payload: payload('m_0'),
        decoupled: false,
        executeTimeoutMs: 0,
        destroyGraceMs: 5000,
        ownsProcess: true,
        logger: noopLogger,
      });
      return { host, inst };
    };
    const never = new AbortController().signal;
    const run = async (inst: ProcessInstance, k: number, viewsOk: boolean) => {
      const r = recorder();
      await inst.execute([request([fp32('INPUT0', values(k))], ['OUTPUT0'], { viewsOk })], r, never);
      const resp = r.finals().get(0) as EngineResponse;
      return { resp, data: outputOf(resp, 'OUTPUT0').data as Float32Array };
    };

    it('a held view keeps its bytes while later requests run, and its block comes back on release', async () => {
      const { host, inst } = await make('hold');
      const first = await run(inst, 1, true);
      assert.ok(first.resp.lease !== undefined, 'a lease came with the lent outputs');
      assert.equal(host.peer.held, 1);
      for (let k = 2; k < 40; k++) {
        const later = await run(inst, k, true);
        assert.equal(later.data[7], k * 1e5 + 7);
        later.resp.lease!.release();
      }
      assert.equal(first.data[0], 1e5, 'the held view was not overwritten by the 38 requests after it');
      assert.equal(first.data[N - 1], 1e5 + N - 1);
      assert.equal(host.peer.held, 1, 'only the held block is still lent');
      first.resp.lease!.release();
      first.resp.lease!.release(); // idempotent
      assert.equal(host.peer.held, 0);
      const copied = await run(inst, 99, false);
      assert.equal(copied.resp.lease, undefined, 'a request without viewsOk gets bytes it owns');
      assert.equal(host.peer.held, 0);
      assert.equal(copied.data[3], 99 * 1e5 + 3);
      await inst.destroy();
    });

    it('the child gets every lent block back: no growth over many lent requests', async () => {
      const { host, inst } = await make('cycle');
      for (let k = 0; k < 200; k++) (await run(inst, k, true)).resp.lease!.release();
      assert.equal(host.peer.held, 0);
      // The child reports no segment beyond its first two: blocks were reused, not leaked.
      assert.ok(
        !existsSync(join(SHM_DIR, `nereid_test_${process.pid}_lend_cycle_c3`)),
        'the child did not keep growing',
      );
      await inst.destroy();
    });

    it('a view outlives its process: unmapping waits for the release (no crash reading it)', async () => {
      const { host, inst } = await make('exit');
      const held = await run(inst, 5, true);
      await inst.destroy();
      await host.exited;
      assert.equal(held.data[11], 5e5 + 11, 'still readable after the child exited');
      held.resp.lease!.release();
      assert.equal(host.peer.held, 0);
    });
  });

  it('a crash fails every instance it hosts, each naming itself', async () => {
    const host = await start(`nereid_test_${process.pid}_crash_`);
    const opts = (name: string) => ({
      name,
      payload: payload(name),
      decoupled: false,
      executeTimeoutMs: 0,
      destroyGraceMs: 5000,
      ownsProcess: false,
      logger: noopLogger,
    });
    const [a, b] = await Promise.all([
      ProcessInstance.create(host, opts('m_0')),
      ProcessInstance.create(host, opts('m_1')),
    ]);
    process.kill(host.pid, 'SIGSEGV');
    const [da, db] = await Promise.all([a.died, b.died]);
    assert.equal(da.message, `instance m_0 (python process ${host.pid}) exited with signal SIGSEGV`);
    assert.equal(db.message, `instance m_1 (python process ${host.pid}) exited with signal SIGSEGV`);
  });

  it('BAD CONFIG - a child that never says ready is killed after the start timeout', async () => {
    await assert.rejects(
      ChildProcessHost.start({
        kind: 'test process',
        command: process.execPath,
        args: ['-e', 'setTimeout(() => {}, 60000)', '--'],
        shm: { prefix: `nereid_test_${process.pid}_silent_`, defaultByteSize: 4096, growthByteSize: 4096 },
        startTimeoutMs: 300,
        logger: noopLogger,
      }),
      /did not start within 300 ms/,
    );
  });
});
