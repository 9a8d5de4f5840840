import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { InvalidArgError, NereidError, UnavailableError, UnsupportedError } from '../../core/errors.js';
import {
  addSubPlan,
  config,
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
} from '../../../test/helpers/tensorrt.js';
import { addSubRequest, logFile, tensorrtHarness } from '../../../test/helpers/tensorrt-harness.js';

// Everything here runs against the TEST DOUBLE of TensorRT and CUDA (test/fixtures/tensorrt/double), through the
// real transport and the real engine module; what runs on real TensorRT is scripts/gpu/tensorrt-on-device.sh.
// Auto-complete from the plan, execution and what cannot load; the options and their effect: backend-options.test.ts.

const never = new AbortController().signal;
const { load, instance, cleanup: onCleanup } = tensorrtHarness();

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
    onCleanup(() => removeModel(root));
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
    onCleanup(() => removeModel(root));
    writeFileSync(planPath, '');
    await assert.rejects(
      loadTrt(`${planPath}.missing`, dir, config('name: "m"\nbackend: "tensorrt"')),
      /does not exist/,
    );
  });
});
