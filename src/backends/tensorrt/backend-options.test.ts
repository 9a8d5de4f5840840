import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { addSubPlan, fp32, output, readEvents, recorder, request, sumPlan } from '../../../test/helpers/tensorrt.js';
import { addSubRequest, logFile, tensorrtHarness } from '../../../test/helpers/tensorrt-harness.js';

// Everything here runs against the TEST DOUBLE of TensorRT and CUDA (test/fixtures/tensorrt/double), through the
// real transport and the real engine module; what runs on real TensorRT is scripts/gpu/tensorrt-on-device.sh.
// The backend-config and model-config options and their effect; the rest of the backend: backend.test.ts.

const never = new AbortController().signal;
const { load, instance } = tensorrtHarness();

describe('tensorrt backend: options and their effect (observed through the double)', () => {
  async function copies(
    backendConfig: Record<string, string>,
    cfg = 'name: "m"\nbackend: "tensorrt"',
  ): Promise<number> {
    const log = logFile();
    const m = await load(addSubPlan(), cfg, { backendConfig, env: { NEREID_TRT_DOUBLE_LOG: log } });
    const inst = await instance(m);
    const r = recorder();
    await inst.execute([addSubRequest(1, 1), addSubRequest(1, 2), addSubRequest(2, 3), addSubRequest(1, 4)], r, never);
    assert.deepEqual([...(output(r.final(3), 'OUTPUT0').data as Float32Array)], [5, 5, 5, 5]);
    assert.deepEqual([...(output(r.final(2), 'OUTPUT0').data as Float32Array)], Array(8).fill(4));
    return readEvents(log).filter((e) => e.ev === 'memcpy' && e.kind === 'cudaMemcpyHostToDevice').length;
  }

  it('coalesce-request-input: one host-to-device copy per input instead of one per request', async () => {
    assert.equal(await copies({}), 8);
    assert.equal(await copies({ 'coalesce-request-input': 'true' }), 2);
  });

  it("a batch's outputs leave the GPU in one copy per run contiguous in the device buffer and the response block", async () => {
    const d2h = async (plan: ReturnType<typeof addSubPlan>, width: number, outputs: string[]): Promise<number> => {
      const log = logFile();
      const m = await load(plan, undefined, { env: { NEREID_TRT_DOUBLE_LOG: log } });
      const inst = await instance(m);
      const r = recorder();
      const rowsOf = [1, 1, 2, 1];
      const req = (rows: number, v: number) =>
        request(
          [
            fp32(
              'INPUT0',
              Array.from({ length: rows }, () => Array(width).fill(v)),
            ),
            fp32(
              'INPUT1',
              Array.from({ length: rows }, () => Array(width).fill(1)),
            ),
          ],
          outputs,
        );
      await inst.execute(
        rowsOf.map((rows, i) => req(rows, i + 1)),
        r,
        never,
      );
      rowsOf.forEach((rows, i) =>
        assert.deepEqual([...(output(r.final(i), 'OUTPUT0').data as Float32Array)], Array(rows * width).fill(i + 2)),
      );
      return readEvents(log).filter((e) => e.ev === 'memcpy' && e.kind === 'cudaMemcpyDeviceToHost').length;
    };
    // One output of 64-byte rows: every request's rows follow the previous one's in both places, so one copy.
    const wide = sumPlan(16, 8 << 20);
    assert.equal(await d2h(wide, 16, ['OUTPUT0']), 1);
    // Two outputs of 16-byte rows: the block interleaves them per request (64-byte aligned), so one copy each.
    assert.equal(await d2h(addSubPlan(), 4, ['OUTPUT0', 'OUTPUT1']), 8);
  });

  it('gather_kernel_buffer_threshold: inputs in that many pieces are gathered first, then copied once', async () => {
    assert.equal(
      await copies({}, 'name: "m"\nbackend: "tensorrt"\noptimization { gather_kernel_buffer_threshold: 3 }'),
      2,
    );
  });

  it("execution_context_allocation_strategy: STATIC takes the largest profile memory at once, ON_PROFILE_CHANGE the profile's", async () => {
    const mem = async (strategy: string): Promise<{ strategy: unknown; bytes: unknown }> => {
      const log = logFile();
      const m = await load(
        addSubPlan(),
        `name: "m"\nbackend: "tensorrt"\nparameters { key: "execution_context_allocation_strategy" value { string_value: "${strategy}" } }`,
        { env: { NEREID_TRT_DOUBLE_LOG: log } },
      );
      await instance(m);
      const events = readEvents(log);
      return {
        strategy: events.find((e) => e.ev === 'context')?.strategy,
        bytes: events.filter((e) => e.ev === 'set_profile').pop()?.bytes,
      };
    };
    assert.deepEqual(await mem('STATIC'), { strategy: 'STATIC', bytes: 64 << 20 });
    assert.deepEqual(await mem('ON_PROFILE_CHANGE'), { strategy: 'ON_PROFILE_CHANGE', bytes: 8 << 20 });
  });

  it('optimization.cuda.graphs with graph_spec: a batch of the captured shape replays the graph, others run plainly', async () => {
    const log = logFile();
    const m = await load(
      addSubPlan(),
      'name: "m"\nbackend: "tensorrt"\nmax_batch_size: 8\noptimization { cuda { graphs: true graph_spec { batch_size: 2 } } }',
      { env: { NEREID_TRT_DOUBLE_LOG: log } },
    );
    const inst = await instance(m);
    const r = recorder();
    await inst.execute([addSubRequest(1, 7), addSubRequest(1, 8)], r, never);
    assert.deepEqual([...(output(r.final(1), 'OUTPUT0').data as Float32Array)], [9, 9, 9, 9]);
    await inst.execute([addSubRequest(3)], recorder(), never);
    const events = readEvents(log);
    assert.equal(events.filter((e) => e.ev === 'graph_instantiate').length, 1);
    assert.equal(events.filter((e) => e.ev === 'graph_launch').length, 1);
  });

  it('input shapes are set only when they change, never for a graph replay; answers stay right across the switches', async () => {
    const log = logFile();
    const m = await load(
      addSubPlan(),
      'name: "m"\nbackend: "tensorrt"\nmax_batch_size: 8\noptimization { cuda { graphs: true graph_spec { batch_size: 2 } } }',
      { env: { NEREID_TRT_DOUBLE_LOG: log } },
    );
    const inst = await instance(m);
    const atLoad = readEvents(log).filter((e) => e.ev === 'set_input_shape').length;
    // rows: 3, 3, 2 (graph), 3, 1, 1
    for (const [rows, v] of [
      [3, 1],
      [3, 2],
      [2, 3],
      [3, 4],
      [1, 5],
      [1, 6],
    ] as const) {
      const r = recorder();
      await inst.execute([addSubRequest(rows, v)], r, never);
      assert.deepEqual(
        [...(output(r.final(0), 'OUTPUT0').data as Float32Array)],
        new Array(rows * 4).fill(v + 1),
        `rows ${rows}`,
      );
    }
    const sets = readEvents(log)
      .filter((e) => e.ev === 'set_input_shape')
      .slice(atLoad);
    // Two inputs each time the shapes change for a plain run: 3 (first), 3 again after the graph moved nothing, 1.
    assert.deepEqual(
      sets.map((e) => (e.shape as number[])[0]),
      [3, 3, 1, 1],
      'set for rows 3 once and rows 1 once; the graph replay and the repeats set nothing',
    );
    assert.equal(readEvents(log).filter((e) => e.ev === 'graph_launch').length, 1);
  });

  it('optimization.cuda.busy_wait_events spins on the completion event; without it the thread sleeps in it', async () => {
    const waits = async (busy: boolean): Promise<string[]> => {
      const log = logFile();
      const m = await load(
        addSubPlan(),
        `name: "m"\nbackend: "tensorrt"\noptimization { cuda { busy_wait_events: ${busy} } }`,
        {
          env: { NEREID_TRT_DOUBLE_LOG: log },
        },
      );
      const inst = await instance(m);
      await inst.execute([addSubRequest(1)], recorder(), never);
      return readEvents(log)
        .filter((e) => e.ev === 'event_poll' || e.ev === 'event_wait')
        .map((e) => (e.ev === 'event_poll' ? 'poll' : String(e.mode)));
    };
    assert.deepEqual(await waits(true), ['poll']);
    assert.deepEqual(await waits(false), ['blocking']);
  });

  it('optimization.cuda.output_copy_stream copies outputs on a second stream after an event', async () => {
    const log = logFile();
    const m = await load(
      addSubPlan(),
      'name: "m"\nbackend: "tensorrt"\noptimization { cuda { output_copy_stream: true } }',
      {
        env: { NEREID_TRT_DOUBLE_LOG: log },
      },
    );
    const inst = await instance(m);
    await inst.execute([addSubRequest(1)], recorder(), never);
    const events = readEvents(log);
    const h2d = events.find((e) => e.ev === 'memcpy' && e.kind === 'cudaMemcpyHostToDevice')!;
    const d2h = events.find((e) => e.ev === 'memcpy' && e.kind === 'cudaMemcpyDeviceToHost')!;
    assert.notEqual(h2d.stream, d2h.stream);
    assert.ok(events.some((e) => e.ev === 'stream_wait'));
  });

  it('execution-policy: DEVICE_BLOCKING (default) runs one batch at a time per GPU; BLOCKING lets instances overlap', async () => {
    const overlaps = async (backendConfig: Record<string, string>): Promise<boolean> => {
      const log = logFile();
      const m = await load(addSubPlan({ sleep_ms: 300 }), undefined, {
        backendConfig,
        env: { NEREID_TRT_DOUBLE_LOG: log },
      });
      const a = await instance(m);
      const b = await instance(m);
      await Promise.all([
        a.execute([addSubRequest(1)], recorder(), never),
        b.execute([addSubRequest(1)], recorder(), never),
      ]);
      const [x, y] = readEvents(log).filter((e) => e.ev === 'execute') as unknown as { t0: number; t1: number }[];
      return x.t0 < y.t1 && y.t0 < x.t1;
    };
    assert.equal(await overlaps({}), false);
    assert.equal(await overlaps({ 'execution-policy': 'BLOCKING' }), true);
  });

  it('plugins: listed libraries are loaded before the engine; a missing one is a load error naming it', async () => {
    // A system library a Python process does not load by itself stands in for a plugin.
    const name = ['libattr.so.1', 'libacl.so.1', 'libuuid.so.1'].find((n) =>
      existsSync(`/usr/lib/x86_64-linux-gnu/${n}`),
    );
    assert.ok(name, 'a stand-in plugin library exists');
    const lib = `/usr/lib/x86_64-linux-gnu/${name}`;
    const plan = addSubPlan({ requires_library: name });
    await assert.rejects(load(plan), /cannot deserialize plan .*test double: library lib\w+\.so\.1 is not loaded/);
    const m = await load(plan, undefined, { backendConfig: { plugins: lib } });
    const inst = await instance(m);
    const r = recorder();
    await inst.execute([addSubRequest(1)], r, never);
    assert.ok(!(r.final(0) instanceof Error));
    await assert.rejects(
      load(addSubPlan(), undefined, { backendConfig: { plugins: `${lib};/nonexistent/libplugin.so` } }),
      /TensorRT plugin library '\/nonexistent\/libplugin\.so' does not exist/,
    );
  });

  it('version-compatible: such a plan loads only with the option (host code allowed), and through the lean runtime where only it is installed', async () => {
    const plan = addSubPlan({ version_compatible: true });
    await assert.rejects(load(plan), /version-compatible plan needs engine host code allowed/);
    const log = logFile();
    const full = await load(plan, undefined, {
      backendConfig: { 'version-compatible': 'true' },
      env: { NEREID_TRT_DOUBLE_LOG: log },
    });
    await instance(full);
    assert.deepEqual(
      readEvents(log)
        .filter((e) => e.ev === 'deserialize')
        .map((e) => [e.flavor, e.host_code]),
      [
        ['full', true],
        ['full', true],
      ],
    );
    const leanOnly = { NEREID_TRT_DOUBLE_ONLY_LEAN: '1' };
    await assert.rejects(
      load(plan, undefined, { env: leanOnly }),
      /only TensorRT's lean runtime \(tensorrt_lean\) is installed.*version-compatible=true/,
    );
    const lean = await load(plan, undefined, { backendConfig: { 'version-compatible': 'true' }, env: leanOnly });
    assert.equal(lean.config.max_batch_size, 8);
    const inst = await instance(lean);
    const r = recorder();
    await inst.execute([addSubRequest(1, 3)], r, never);
    assert.deepEqual([...(output(r.final(0), 'OUTPUT0').data as Float32Array)], [4, 4, 4, 4]);
  });
});
