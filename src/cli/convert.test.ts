import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import * as ort from 'onnxruntime-node';
import { parseModelConfigOrThrow } from '../config/index.js';
import { DOUBLE, MAGIC, PYTHON, loadTrt } from '../../test/helpers/tensorrt.js';
import { ROOT } from '../backends/runtime/process/python-env.js';
import { parseConvertArgs, parseShapes, runConvert } from './convert.js';

// `nereid convert` against the TEST DOUBLE of TensorRT (test/fixtures/tensorrt/double): the command line, the
// spec handed to the Python builder, the profile, precision handling, the timing cache, the config it writes and
// every refusal. The real builder cannot run here (no GPU) nor on the H200 (scripts/gpu/tensorrt-on-device.sh
// shows why); the ONNX precision conversion runs for real (checked with onnxruntime).

const ENCODER = join(ROOT, 'examples/model_repository/text_encoder/1/model.onnx');
const work = mkdtempSync(join(tmpdir(), 'nereid-convert-'));
after(() => rmSync(work, { recursive: true, force: true }));

function capture(): { io: { out: (s: string) => void; err: (s: string) => void }; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (s) => out.push(s), err: (s) => err.push(s) }, out, err };
}

/** The test double stands in for a GPU: tell the command there is one (this machine has none). */
const HAS_GPU = { noGpu: () => Promise.resolve(undefined) };
const SHAPES = [
  '--minShapes=input_ids:1x8,attention_mask:1x8,token_type_ids:1x8,',
  '--optShapes=input_ids:4x8,attention_mask:4x8,token_type_ids:4x8',
  '--maxShapes=input_ids:8x8,attention_mask:8x8,token_type_ids:8x8',
];

describe('nereid convert: command line', () => {
  it("parses trtexec's flag names and shape syntax (a trailing comma too), and the kebab-case ones", () => {
    const a = parseConvertArgs([
      '--onnx',
      'm.onnx',
      '--saveEngine=out/1/model.plan',
      ...SHAPES,
      '--fp16',
      '--memPoolSize=workspace:1024',
      '--timingCacheFile',
      'tc.bin',
      '--versionCompatible',
      '--config',
    ]);
    assert.equal(a.spec.precision, 'fp16');
    assert.equal(a.spec.workspace_mib, 1024);
    assert.equal(a.spec.version_compatible, true);
    assert.deepEqual(a.spec.shapes.input_ids, { min: [1, 8], opt: [4, 8], max: [8, 8] });
    assert.ok(a.config?.endsWith('/out/config.pbtxt'));
    assert.deepEqual([...parseShapes('x', "'a b':1x3x224x224")], [['a b', [1, 3, 224, 224]]]);
  });

  it("parses trtexec's I/O formats: one per tensor or one for all, linear only", () => {
    const a = parseConvertArgs([
      '--onnx',
      'm.onnx',
      '--inputIOFormats=int32:chw,int32:chw,int32:chw',
      '--outputIOFormats=fp16:chw',
      '--versionCompatible',
      '--excludeLeanRuntime',
    ]);
    assert.deepEqual(
      a.spec.io_formats?.inputs?.map((f) => f.dtype),
      ['int32', 'int32', 'int32'],
    );
    assert.deepEqual(a.spec.io_formats?.outputs, [{ dtype: 'fp16', format: 'linear' }]);
    assert.equal(a.spec.exclude_lean_runtime, true);
    assert.equal(parseConvertArgs(['--onnx', 'm.onnx']).spec.io_formats, undefined);
  });

  it('BAD USAGE - each mistake is named (exit 2)', () => {
    assert.throws(
      () => parseConvertArgs(['--onnx', 'm', '--inputIOFormats=int33:chw']),
      /--inputIOFormats: 'int33:chw' is not type:format/,
    );
    assert.throws(
      () => parseConvertArgs(['--onnx', 'm', '--outputIOFormats=fp16:hwc8']),
      /format 'hwc8' in 'fp16:hwc8' is a vectorized layout; Nereid serves linear tensors only/,
    );
    assert.throws(
      () => parseConvertArgs(['--onnx', 'm', '--excludeLeanRuntime']),
      /--exclude-lean-runtime applies to version-compatible plans/,
    );
    assert.throws(() => parseConvertArgs([]), /--onnx MODEL.onnx is required/);
    assert.throws(() => parseConvertArgs(['--onnx', 'm', '--fp16', '--bf16']), /exclude each other/);
    assert.throws(() => parseConvertArgs(['--onnx', 'm', '--int8']), /--int8 needs --calib/);
    assert.throws(() => parseConvertArgs(['--onnx', 'm', '--minShapes=x:1xa']), /dims must be non-negative integers/);
    assert.throws(() => parseConvertArgs(['--onnx', 'm', '--best']), /unknown option '--best'/);
    assert.throws(
      () => parseConvertArgs(['--onnx', 'm', '--output', 'plan.bin', '--config']),
      /--config without a path needs --output <model>\/<version>\/model.plan/,
    );
  });
});

describe('nereid convert: building (TensorRT test double)', () => {
  it("builds the seed's way: profile per input, FP16 as a converted strongly typed network on TensorRT 11, timing cache, and the config auto-complete gives", async () => {
    const plan = join(work, 'repo', 'encoder', '1', 'model.plan');
    const cache = join(work, 'timing.cache');
    const c = capture();
    const code = await runConvert(
      [
        '--onnx',
        ENCODER,
        '--output',
        plan,
        ...SHAPES,
        '--fp16',
        '--workspace',
        '256',
        '--timing-cache',
        cache,
        '--config',
      ],
      c.io,
      { ...HAS_GPU, pythonPath: [DOUBLE] },
    );
    assert.equal(code, 0, c.err.join(''));
    const err = c.err.join('');
    assert.match(err, /has no FP16 builder flag: converting the ONNX model's weights and activations to FP16/);
    assert.match(err, /converted 29 float32 initializer\(s\)/);
    assert.match(err, /Building engine \(test double\): step 2\/2/);
    assert.match(err, /timing cache: wrote/);
    const built = JSON.parse(readFileSync(plan).subarray(MAGIC.length).toString()) as Record<string, unknown>;
    assert.equal(built.strongly_typed, true);
    assert.equal(built.workspace, 256 << 20);
    assert.deepEqual((built.profiles as Record<string, unknown>[])[0].input_ids, [
      [1, 8],
      [4, 8],
      [8, 8],
    ]);
    assert.ok(existsSync(cache));
    const cfg = parseModelConfigOrThrow(
      readFileSync(join(work, 'repo', 'encoder', 'config.pbtxt'), 'utf8'),
      'config.pbtxt',
    );
    assert.equal(cfg.name, 'encoder');
    assert.equal(cfg.platform, 'tensorrt_plan');
    assert.equal(cfg.max_batch_size, 8);
    assert.deepEqual(
      cfg.input?.map((i) => [i.name, i.data_type, i.dims]),
      [
        ['input_ids', 'TYPE_INT32', [-1]],
        ['attention_mask', 'TYPE_INT32', [-1]],
        ['token_type_ids', 'TYPE_INT32', [-1]],
      ],
    );
    // The plan it wrote (and the config) load through the backend: an instance is created on it. (The double's
    // built plans do not compute the model, so no request is run here.)
    const m = await loadTrt(plan, join(work, 'repo', 'encoder'), cfg);
    const inst = await m.instance();
    await inst.destroy();
    await m.handle.unload();
  });

  it('the FP16 model it builds from computes what the FP32 model does (onnxruntime, max error < 0.02)', async () => {
    const { execFileSync } = await import('node:child_process');
    const fp16 = join(work, 'encoder.fp16.onnx');
    execFileSync(
      PYTHON,
      [
        '-c',
        `from nereid_python.engines.tensorrt import precision; precision.convert(${JSON.stringify(ENCODER)}, ${JSON.stringify(fp16)}, "fp16")`,
      ],
      {
        env: { ...process.env, PYTHONPATH: join(ROOT, 'python') },
      },
    );
    const feeds = () => ({
      input_ids: new ort.Tensor(
        'int32',
        Int32Array.from({ length: 16 }, (_, i) => (i * 7) % 100),
        [2, 8],
      ),
      attention_mask: new ort.Tensor('int32', new Int32Array(16).fill(1), [2, 8]),
      token_type_ids: new ort.Tensor('int32', new Int32Array(16), [2, 8]),
    });
    const a = await (await ort.InferenceSession.create(ENCODER)).run(feeds());
    const b = await (await ort.InferenceSession.create(fp16)).run(feeds());
    const x = a.output.data as Float32Array;
    const y = b.output.data as Float32Array;
    assert.equal(b.output.type, 'float32', 'outputs keep their type');
    let worst = 0;
    for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]));
    assert.ok(worst < 0.02, `max error ${worst}`);
  });

  it('NO BUILDER RESOURCE - says exactly why it cannot build and what to install (exit 1)', async () => {
    const c = capture();
    const code = await runConvert(['--onnx', ENCODER, '--output', join(work, 'x.plan'), ...SHAPES], c.io, {
      ...HAS_GPU,
      pythonPath: [DOUBLE],
      env: { NEREID_TRT_DOUBLE_BUILDER: 'missing-resource' },
    });
    assert.equal(code, 1);
    assert.match(
      c.err.join(''),
      /TensorRT 11\.2\.1\.2 cannot build engines on Test Double GPU .*: its builder needs libnvinfer_builder_resource_sm90\.so\.11\.2\.1, which this TensorRT installation does not have .*pip install tensorrt-cu13==11\.2\.1\.2/,
    );
  });

  it("TensorRT 10.6: the blog's I/O formats become the plan's types, FP16 is the builder flag, VC may leave out the lean runtime", async () => {
    const plan = join(work, 'io', 'model.plan');
    const c = capture();
    const code = await runConvert(
      [
        '--onnx',
        ENCODER,
        '--saveEngine',
        plan,
        ...SHAPES,
        '--fp16',
        '--inputIOFormats=int64:chw,int64:chw,int64:chw',
        '--outputIOFormats=fp16:chw',
        '--versionCompatible',
        '--excludeLeanRuntime',
      ],
      c.io,
      { ...HAS_GPU, pythonPath: [DOUBLE], env: { NEREID_TRT_DOUBLE_VERSION: '10.6.0' } },
    );
    assert.equal(code, 0, c.err.join(''));
    assert.match(c.out.join(''), /TensorRT 10\.6\.0, fp16/);
    const built = JSON.parse(readFileSync(plan).subarray(MAGIC.length).toString()) as {
      io: { name: string; dtype: string }[];
      precision: string[];
      strongly_typed: boolean;
      trt_version: string;
    };
    assert.deepEqual(
      built.io.map((t) => `${t.name}:${t.dtype}`),
      ['input_ids:INT64', 'attention_mask:INT64', 'token_type_ids:INT64', 'output:HALF'],
    );
    assert.deepEqual(built.precision, ['FP16']);
    assert.equal(built.strongly_typed, false);
    assert.equal(built.trt_version, '10.6.0');
  });

  it('REFUSALS - I/O formats: a count that fits neither one nor every input; a type change on strongly typed TensorRT 11', async () => {
    const go = async (args: string[], version: string): Promise<string> => {
      const c = capture();
      const extra = { ...HAS_GPU, pythonPath: [DOUBLE], env: { NEREID_TRT_DOUBLE_VERSION: version } };
      assert.equal(
        await runConvert(['--onnx', ENCODER, '--output', join(work, 'z.plan'), ...SHAPES, ...args], c.io, extra),
        1,
      );
      return c.err.join('');
    };
    assert.match(
      await go(['--inputIOFormats=int32:chw,int32:chw'], '10.6.0'),
      /--inputIOFormats gives 2 formats; the model has 3 inputs \(\['input_ids', 'attention_mask', 'token_type_ids'\]\)/,
    );
    assert.match(
      await go(['--inputIOFormats=int64:chw'], '11.2.1.2'),
      /TensorRT 11\.2\.1\.2 builds strongly typed networks, where input 'input_ids' keeps the model's type .*export the ONNX model with int64 inputs/,
    );
  });

  it('REFUSALS - no shapes for a dynamic input, shapes for an unknown input, INT8 on TensorRT 11, no TensorRT at all', async () => {
    const go = async (args: string[], extra = { ...HAS_GPU, pythonPath: [DOUBLE] }): Promise<string> => {
      const c = capture();
      assert.equal(await runConvert(['--onnx', ENCODER, '--output', join(work, 'y.plan'), ...args], c.io, extra), 1);
      return c.err.join('');
    };
    assert.match(
      await go([]),
      /input 'input_ids' has dynamic dims \[-1,-1\]: give --minShapes\/--optShapes\/--maxShapes/,
    );
    assert.match(
      await go([...SHAPES, '--minShapes=ids:1x8']),
      /shapes are given for \['ids'\], which the model has no input named/,
    );
    const calib = join(work, 'calib.cache');
    (await import('node:fs')).writeFileSync(calib, 'x');
    assert.match(
      await go([...SHAPES, '--int8', '--calib', calib]),
      /TensorRT 11\.2\.1\.2 offers no INT8 calibration .*Q\/DQ/,
    );
    assert.match(
      await go(SHAPES, { ...HAS_GPU, pythonPath: [] }),
      /TensorRT's Python package is not importable by .*: run 'nereid tensorrt setup'/,
    );
  });
});

describe('nereid convert: a machine without a GPU', () => {
  it('BAD CALL - says "no GPU" before anything else, and offers no TensorRT set-up (exit 1)', async () => {
    const c = capture();
    // No TensorRT either (an empty PYTHONPATH): the set-up advice is what the old code gave here.
    const code = await runConvert(['--onnx', ENCODER, '--output', join(work, 'w.plan'), ...SHAPES], c.io, {
      pythonPath: [],
      noGpu: () => Promise.resolve('no NVIDIA driver: libnvidia-ml.so.1 not found'),
    });
    assert.equal(code, 1);
    const err = c.err.join('');
    assert.match(err, /^nereid convert: no GPU on this machine \(no NVIDIA driver: libnvidia-ml\.so\.1 not found\)/);
    assert.doesNotMatch(err, /tensorrt setup|pip install|driver version is insufficient/);
    assert.equal(c.out.join(''), '');
  });
});
