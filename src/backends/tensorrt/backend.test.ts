import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import { InvalidArgError, NereidError, UnavailableError, UnsupportedError } from '../../core/errors.js';
import type { Instance } from '../contract.js';
import {
  addSubPlan,
  config,
  fp32,
  int32,
  loadTrt,
  output,
  planBytes,
  readEvents,
  recorder,
  removeModel,
  request,
  seedPlan,
  writeModel,
  type FakePlan,
  type LoadedTrt,
} from '../../../test/helpers/tensorrt.js';

// Everything here runs against the TEST DOUBLE of TensorRT and CUDA (test/fixtures/tensorrt/double), through the
// real transport and the real engine module; what runs on real TensorRT is scripts/gpu/tensorrt-on-device.sh.

const never = new AbortController().signal;
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});
after(() => {
  const left = readdirSync('/dev/shm').filter((n) => n.startsWith(`nereid_trt_${process.pid}_`));
  assert.deepEqual(left, [], 'no shared-memory segment outlives its process');
});

function logFile(): string {
  return join(mkdtempSync(join(tmpdir(), 'nereid-trt-log-')), 'events.jsonl');
}

async function load(
  plan: FakePlan | Buffer,
  cfgText = 'name: "m"\nbackend: "tensorrt"',
  opts: Parameters<typeof loadTrt>[3] = {},
): Promise<LoadedTrt> {
  const { dir, root, planPath } = writeModel('m', plan);
  cleanup.push(() => removeModel(root));
  const m = await loadTrt(planPath, dir, config(cfgText), opts);
  cleanup.push(() => m.handle.unload());
  return m;
}

async function instance(
  m: LoadedTrt,
  spec: Parameters<LoadedTrt['instance']>[0] = {},
): Promise<Instance & { pid: number }> {
  const inst = await m.instance(spec);
  cleanup.push(() => inst.destroy());
  return inst;
}

const ones = (n: number, v = 1): number[][] => Array.from({ length: n }, () => [v, v, v, v]);
const addSubRequest = (rows: number, v = 1) =>
  request([fp32('INPUT0', ones(rows, v)), fp32('INPUT1', ones(rows, 1))], ['OUTPUT0', 'OUTPUT1']);

describe('tensorrt backend: auto-complete from the plan', () => {
  it("completes the seed's model_2 (no config): INT32 inputs, dims without the batch dim, max_batch_size from the profile, dynamic batcher", async () => {
    const m = await load(seedPlan(), 'name: "model_2"\nbackend: "tensorrt"');
    assert.equal(m.config.max_batch_size, 32);
    assert.deepEqual(m.config.dynamic_batching, {});
    assert.deepEqual(
      m.config.input?.map((i) => [i.name, i.data_type, i.dims]),
      [
        ['input_ids', 'TYPE_INT32', [16]],
        ['attention_mask', 'TYPE_INT32', [16]],
        ['token_type_ids', 'TYPE_INT32', [16]],
      ],
    );
    assert.deepEqual(
      m.config.output?.map((o) => [o.name, o.data_type, o.dims]),
      [['outputs', 'TYPE_FP32', [16]]],
    );
    const inst = await instance(m);
    const r = recorder();
    const ids = int32('input_ids', [Array.from({ length: 16 }, (_, i) => i)]);
    const mask = int32('attention_mask', [Array.from({ length: 16 }, () => 1)]);
    const types = int32('token_type_ids', [Array.from({ length: 16 }, () => 0)]);
    await inst.execute([request([ids, mask, types], ['outputs'])], r, never);
    const out = output(r.final(0), 'outputs');
    assert.deepEqual(out.shape, [1, 16]);
    assert.deepEqual(
      [...(out.data as Float32Array)],
      Array.from({ length: 16 }, (_, i) => i + 1),
    );
  });

  it('takes max_batch_size from the profiles the instance groups list (the largest of them)', async () => {
    const m = await load(
      addSubPlan(),
      'name: "m"\nbackend: "tensorrt"\ninstance_group { kind: KIND_GPU profile: ["1"] }',
    );
    assert.equal(m.config.max_batch_size, 32);
  });

  it('BAD CONFIG - max_batch_size larger than the profiles allow is a load error naming both', async () => {
    await assert.rejects(
      load(addSubPlan(), 'name: "m"\nbackend: "tensorrt"\nmax_batch_size: 16'),
      (e: NereidError) =>
        e instanceof InvalidArgError && /max_batch_size 16.*profile\(s\) 0 support at most 8/.test(e.message),
    );
  });

  it('BAD CONFIG - a profile the plan does not have is a load error', async () => {
    await assert.rejects(
      load(addSubPlan(), 'name: "m"\nbackend: "tensorrt"\ninstance_group { kind: KIND_GPU profile: ["2"] }'),
      /profile 2 does not exist; the plan has 2 optimization profile\(s\) \(0\.\.1\)/,
    );
  });

  it('BAD CONFIG - a declared datatype that contradicts the plan is a load error', async () => {
    await assert.rejects(
      load(
        addSubPlan(),
        'name: "m"\nbackend: "tensorrt"\nmax_batch_size: 8\ninput [{ name: "INPUT0" data_type: TYPE_FP16 dims: [4] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [4] }]',
      ),
      /input 'INPUT0' is FP32 in the plan \(TensorRT FLOAT\), but config.pbtxt says data_type: TYPE_FP16/,
    );
  });

  it('BAD CONFIG - KIND_CPU is refused: plans run on GPUs only', async () => {
    await assert.rejects(
      load(addSubPlan(), 'name: "m"\nbackend: "tensorrt"\ninstance_group { kind: KIND_CPU }'),
      (e: NereidError) => e instanceof UnsupportedError && /GPUs only/.test(e.message),
    );
  });
});

describe('tensorrt backend: execution', () => {
  it('runs a batch of requests in one execution and answers each with its rows', async () => {
    const log = logFile();
    const m = await load(addSubPlan(), undefined, { env: { NEREID_TRT_DOUBLE_LOG: log } });
    const inst = await instance(m);
    const r = recorder();
    await inst.execute([addSubRequest(1, 5), addSubRequest(3, 2)], r, never);
    assert.deepEqual([...(output(r.final(0), 'OUTPUT0').data as Float32Array)], [6, 6, 6, 6]);
    assert.deepEqual(output(r.final(1), 'OUTPUT1').shape, [3, 4]);
    assert.deepEqual([...(output(r.final(1), 'OUTPUT1').data as Float32Array)], Array(12).fill(1));
    const runs = readEvents(log).filter((e) => e.ev === 'execute');
    assert.equal(runs.length, 1);
    assert.deepEqual(runs[0].shapes, { INPUT0: [4, 4], INPUT1: [4, 4] });
    assert.ok(
      readEvents(log).some((e) => e.ev === 'host_register'),
      'the shared-memory segment is pinned',
    );
  });

  it('picks the profile whose opt shapes are nearest among those that hold the batch', async () => {
    const log = logFile();
    const m = await load(
      addSubPlan(),
      'name: "m"\nbackend: "tensorrt"\ninstance_group { kind: KIND_GPU profile: ["0", "1"] }',
      {
        env: { NEREID_TRT_DOUBLE_LOG: log },
      },
    );
    const inst = await instance(m, { profiles: ['0', '1'] });
    await inst.execute([addSubRequest(2)], recorder(), never);
    await inst.execute([addSubRequest(20)], recorder(), never);
    await inst.execute([addSubRequest(14)], recorder(), never);
    assert.deepEqual(
      readEvents(log)
        .filter((e) => e.ev === 'execute')
        .map((e) => e.profile),
      [0, 1, 1],
    );
  });

  it('BAD REQUEST - a request outside every profile of its instance gets a 400 naming the range; the rest of the batch runs', async () => {
    const m = await load(addSubPlan());
    const inst = await instance(m);
    const r = recorder();
    await inst.execute([addSubRequest(2), addSubRequest(9), addSubRequest(1)], r, never);
    const bad = r.final(1);
    assert.ok(bad instanceof InvalidArgError);
    assert.match(
      bad.message,
      /input 'INPUT0' shape \[9,4\] is outside every optimization profile of this instance \(profile 0: \[1\.\.8,4\]\)/,
    );
    assert.deepEqual(output(r.final(0), 'OUTPUT0').shape, [2, 4]);
    assert.deepEqual(output(r.final(2), 'OUTPUT0').shape, [1, 4]);
  });

  it('hosts every instance of a GPU in one process, and each GPU in its own', async () => {
    const m = await load(
      addSubPlan(),
      'name: "m"\nbackend: "tensorrt"\ninstance_group { kind: KIND_GPU count: 2 gpus: [0, 1] }',
      {
        env: { NEREID_CUDA_DOUBLE_GPUS: '2' },
      },
    );
    const a = await instance(m, { device: 0 });
    const b = await instance(m, { device: 0 });
    const c = await instance(m, { device: 1 });
    assert.equal(a.pid, b.pid);
    assert.notEqual(a.pid, c.pid);
    const r = recorder();
    await Promise.all([a.execute([addSubRequest(1)], r, never), c.execute([addSubRequest(1)], recorder(), never)]);
    assert.deepEqual(output(r.final(0), 'OUTPUT0').shape, [1, 4]);
  });

  it('FAULT - a crashed engine process fails every instance it hosted, naming it', async () => {
    const m = await load(addSubPlan());
    const a = await instance(m);
    const b = await instance(m);
    process.kill(a.pid, 'SIGKILL');
    const [ea, eb] = await Promise.all([a.died, b.died]);
    assert.match(ea.message, /instance m_0 \(tensorrt process \d+\) exited with signal SIGKILL/);
    assert.match(eb.message, /instance m_1/);
    const [c, d] = await Promise.all([instance(m), instance(m)]);
    assert.notEqual(c.pid, a.pid, 'a new instance gets a new process');
    assert.equal(c.pid, d.pid, 'instances restarted together share the new process');
  });
});

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

describe('tensorrt backend: what cannot load says why', () => {
  it("BAD PLAN - bytes that are not a plan: TensorRT's own message", async () => {
    await assert.rejects(load(Buffer.from('not a plan at all')), (e: NereidError) => {
      assert.ok(e instanceof InvalidArgError);
      assert.match(
        e.message,
        /TensorRT 11\.2\.1\.2 cannot deserialize plan '.*model\.plan' \(17 bytes\): IRuntime::deserializeCudaEngine: Error Code 1: Serialization/,
      );
      return true;
    });
  });

  it('BAD PLAN - a plan another TensorRT version built: both versions named, and how to rebuild it', async () => {
    const foreign = addSubPlan({ trt_version: '10.6.0' });
    await assert.rejects(load(foreign), (e: NereidError) => {
      assert.ok(e instanceof InvalidArgError);
      assert.match(
        e.message,
        /plan '.*model\.plan' was built by TensorRT 10\.6, and this is TensorRT 11\.2\.1\.2 \(tag 243\): plans do not cross TensorRT versions\. Rebuild it from its ONNX model with this TensorRT \('nereid convert --onnx MODEL\.onnx --saveEngine \.\.\.'\), or serve it with the TensorRT that built it \('nereid tensorrt setup --version 10\.6'\) \(TensorRT said: .*Version tag does not match\. Note: Current Version: 243, Serialized Engine Version: 239\)/,
      );
      return true;
    });
    // and the other way round: an 11.2 plan on a 10.6 runtime
    await assert.rejects(
      load(addSubPlan({ trt_version: '11.2.1.2' }), undefined, {
        env: { NEREID_TRT_DOUBLE_VERSION: '10.6.0' },
      }),
      /was built by TensorRT 11\.2, and this is TensorRT 10\.6\.0 \(tag 239\)/,
    );
  });

  it('BAD PLAN - a truncated plan, and an empty one', async () => {
    const whole = planBytes(addSubPlan());
    await assert.rejects(load(whole.subarray(0, whole.length - 40)), /truncated or corrupt plan/);
    await assert.rejects(load(Buffer.alloc(0)), /plan '.*model\.plan' is empty/);
  });

  it("NO GPU - the engine process says that no CUDA GPU is usable, with CUDA's message", async () => {
    await assert.rejects(load(addSubPlan(), undefined, { env: { NEREID_CUDA_DOUBLE_GPUS: '0' } }), (e: NereidError) => {
      assert.ok(e instanceof UnavailableError);
      assert.match(e.message, /no CUDA GPU is usable by this process: cudaGetDeviceCount failed: cudaErrorNoDevice/);
      return true;
    });
  });

  it('NOT INSTALLED - without TensorRT the error names what to run', async () => {
    const { dir, root, planPath } = writeModel('m', addSubPlan());
    cleanup.push(() => removeModel(root));
    const { tensorrtBackend } = await import('./backend.js');
    const b = tensorrtBackend();
    const acx = {
      modelName: 'm',
      modelPath: planPath,
      backendConfig: {},
      autoComplete: true,
      logger: (await import('../../core/logger.js')).noopLogger,
    };
    await assert.rejects(
      b.autoComplete(config('name: "m"\nbackend: "tensorrt"'), acx),
      /TensorRT's Python package is not importable by .*: run 'nereid tensorrt setup'/,
    );
    void dir;
  });

  it('BAD CONFIG - unknown backend-config keys and bad values are load errors', async () => {
    await assert.rejects(
      load(addSubPlan(), undefined, { backendConfig: { 'coalesce-inputs': 'true' } }),
      /unknown key; the tensorrt backend knows/,
    );
    await assert.rejects(
      load(addSubPlan(), undefined, { backendConfig: { 'execution-policy': 'FAST' } }),
      /expected DEVICE_BLOCKING/,
    );
  });

  it('BAD CONFIG - a plan file that is missing', async () => {
    const { dir, root, planPath } = writeModel('m', addSubPlan());
    cleanup.push(() => removeModel(root));
    writeFileSync(planPath, '');
    await assert.rejects(
      loadTrt(`${planPath}.missing`, dir, config('name: "m"\nbackend: "tensorrt"')),
      /does not exist/,
    );
  });
});
