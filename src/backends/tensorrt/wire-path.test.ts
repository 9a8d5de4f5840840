import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { describe, it } from 'node:test';
import type { EngineRequest } from '../contract.js';
import { addSubPlan, fp32, int32, output, recorder, request, sumPlan } from '../../../test/helpers/tensorrt.js';
import { logFile, tensorrtHarness } from '../../../test/helpers/tensorrt-harness.js';

// The engine's fast path (python/nereid_python/engines/tensorrt/wire.py: a batch run from the host's message, no
// request objects) against the TEST DOUBLE of TensorRT and CUDA, through the real transport. Which path ran is
// read from the engine's own trace (NEREID_TRT_TRACE); NEREID_TRT_WIRE=0 forces the general path to compare with.

const never = new AbortController().signal;
const { load, instance } = tensorrtHarness();

const rows = (n: number, v: number): number[][] => Array.from({ length: n }, (_, i) => [v, v + i, v * 2, -v]);

async function run(requests: EngineRequest[], env: Record<string, string> = {}) {
  const trace = logFile();
  const m = await load(addSubPlan(), undefined, { env: { NEREID_TRT_TRACE: trace, ...env } });
  const inst = await instance(m);
  const r = recorder();
  await inst.execute(requests, r, never);
  const batches = readFileSync(trace, 'utf8')
    .split('\n')
    .filter((l) => l.includes('"event":"batch"'))
    .map((l) => JSON.parse(l) as { wire: boolean; requests: number });
  return { r, batches };
}

/** Rows of 64 KiB (FP32) for the leak tests: 4 rows a request, 2 requests a batch = 1 MiB of inputs. */
const WIDE = 16384;
const full = (v: number): number[][] => Array.from({ length: 4 }, () => Array(WIDE).fill(v));

/** This test process's engine shared-memory segments of one kind: 'h' the host's, 'c' the engine process's. */
const segmentsOf = (kind: 'h' | 'c'): string[] =>
  readdirSync('/dev/shm').filter(
    (n) => n.startsWith(`nereid_trt_${process.pid}x`) && new RegExp(`${kind}\\d+$`).test(n),
  );

/** Every request's answer as [output name, shape, values], in the order the request asked for its outputs. */
function answers(r: ReturnType<typeof recorder>, n: number): unknown[] {
  return Array.from({ length: n }, (_, i) => {
    const res = r.final(i);
    if (res instanceof Error) return res.message;
    return res?.outputs.map((o) => [o.name, o.shape, [...(o.data as Float32Array)]]);
  });
}

describe('tensorrt engine: the wire path', () => {
  // Rows 1, 2, 1, 3 (7 of the profile's 8), each request asking for different outputs and in another order.
  const plain = (): EngineRequest[] => [
    request([fp32('INPUT0', rows(1, 1)), fp32('INPUT1', rows(1, 10))], ['OUTPUT0', 'OUTPUT1']),
    request([fp32('INPUT0', rows(2, 2)), fp32('INPUT1', rows(2, 20))], ['OUTPUT1']),
    request([fp32('INPUT0', rows(1, 3)), fp32('INPUT1', rows(1, 30))], ['OUTPUT1', 'OUTPUT0']),
    request([fp32('INPUT0', rows(3, 4)), fp32('INPUT1', rows(3, 40))], ['OUTPUT0']),
  ];

  it('a batch of plain requests runs on it, with answers identical to the general path', async () => {
    const fast = await run(plain());
    const general = await run(plain(), { NEREID_TRT_WIRE: '0' });
    assert.deepEqual(
      fast.batches.map((b) => [b.wire, b.requests]),
      [[true, 4]],
    );
    assert.deepEqual(
      general.batches.map((b) => [b.wire, b.requests]),
      [[false, 4]],
    );
    assert.deepEqual(answers(fast.r, 4), answers(general.r, 4));
    // And right: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1, rows in the request's own order.
    const second = answers(fast.r, 4)[1] as [string, number[], number[]][];
    assert.deepEqual(second, [
      ['OUTPUT1', [2, 4], [...rows(2, 2)].flatMap((row, k) => row.map((x, j) => x - rows(2, 20)[k][j]))],
    ]);
    const third = answers(fast.r, 4)[2] as [string, number[], number[]][];
    assert.deepEqual(
      third.map((o) => o[0]),
      ['OUTPUT1', 'OUTPUT0'],
    );
    assert.deepEqual(
      (answers(fast.r, 4)[3] as [string][]).map((o) => o[0]),
      ['OUTPUT0'],
    );
  });

  it('BAD REQUEST - a request of the wrong datatype sends the batch down the general path: it gets its error, the others their answers', async () => {
    const reqs = plain();
    reqs[2] = request([int32('INPUT0', rows(1, 3)), fp32('INPUT1', rows(1, 30))], ['OUTPUT0']);
    const { r, batches } = await run(reqs);
    assert.deepEqual(
      batches.map((b) => [b.wire, b.requests]),
      [[false, 3]],
    );
    const bad = r.final(2);
    assert.ok(bad instanceof Error);
    assert.match(bad.message, /input 'INPUT0' is INT32, the plan takes FP32/);
    assert.deepEqual([...(output(r.final(0), 'OUTPUT0').data as Float32Array)], [11, 11, 22, -11]);
  });

  it('BAD REQUEST - a request missing an input: the general path answers it, the rest run', async () => {
    const reqs = plain();
    reqs[0] = request([fp32('INPUT0', rows(1, 1))], ['OUTPUT0']);
    const { r, batches } = await run(reqs);
    assert.deepEqual(
      batches.map((b) => b.wire),
      [false],
    );
    const bad = r.final(0);
    assert.ok(bad instanceof Error);
    assert.match(bad.message, /request has no input 'INPUT1'/);
    assert.deepEqual(output(r.final(3), 'OUTPUT0').shape, [3, 4]);
    assert.deepEqual(output(r.final(1), 'OUTPUT1').shape, [2, 4]);
  });

  it('hands every input block back to the host: 40 batches of 1 MiB of inputs stay in the first 16 MiB segment', async () => {
    const trace = logFile();
    const m = await load(sumPlan(WIDE, 64 << 20), undefined, { env: { NEREID_TRT_TRACE: trace } });
    const inst = await instance(m);
    for (let i = 0; i < 40; i++) {
      const r = recorder();
      const req = () => request([fp32('INPUT0', full(i)), fp32('INPUT1', full(1))], ['OUTPUT0']);
      await inst.execute([req(), req()], r, never);
      assert.equal((output(r.final(1), 'OUTPUT0').data as Float32Array)[WIDE * 4 - 1], i + 1);
    }
    const wire = readFileSync(trace, 'utf8')
      .split('\n')
      .filter((l) => l.includes('"wire":true')).length;
    assert.equal(wire, 40);
    const segments = segmentsOf('h');
    assert.ok(segments.length > 0 && segments.every((n) => n.endsWith('h0')), `host segments: ${segments.join(', ')}`);
  });

  it("FAULT - a GPU failure in the wait fails the batch with CUDA's error and gives its answer block back", async () => {
    const m = await load(sumPlan(WIDE, 64 << 20), undefined, { env: { NEREID_CUDA_DOUBLE_FAIL_EVENT_SYNC: '1' } });
    const inst = await instance(m);
    // 40 batches of 512 KiB of answers each: leaked, they would need a second 16 MiB segment in the engine process.
    for (let i = 0; i < 40; i++) {
      const r = recorder();
      const req = () => request([fp32('INPUT0', full(i)), fp32('INPUT1', full(1))], ['OUTPUT0']);
      await assert.rejects(inst.execute([req(), req()], r, never), /unspecified launch failure/);
    }
    const engine = readdirSync('/dev/shm').filter((n) => n.startsWith(`nereid_trt_${process.pid}x`) && /c\d+$/.test(n));
    assert.ok(engine.length > 0 && engine.every((n) => n.endsWith('c0')), `engine segments: ${engine.join(', ')}`);
  });
});
