import { STDIO, type CommandIo } from './command-io.js';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { printModelConfig } from '../config/index.js';
import type { ModelConfig } from '../config/model-config.js';
import { InvalidArgError } from '../core/errors.js';
import { runBuilder as buildPlan, type ConvertSpec, type IOFormat } from '../backends/tensorrt/builder.js';

export type { ConvertSpec, IOFormat } from '../backends/tensorrt/builder.js';
import { parseShapes } from '../backends/tensorrt/shapes.js';
export { parseShapes } from '../backends/tensorrt/shapes.js';
import { resolveEnvironment, type TensorRTEnvironment } from '../backends/tensorrt/environment.js';
import { completeFromPlan } from '../backends/tensorrt/facts.js';
import { backendOptions } from '../backends/tensorrt/options.js';
import { probePlan } from '../backends/tensorrt/probe.js';
import { noGpuReason } from './gpu-presence.js';

/**
 * `nereid convert`: ONNX -> TensorRT plan, as the seed does it with the builder API or trtexec (explicit batch, one
 * optimization profile with min/opt/max shapes per input, FP16), in a Python process running
 * python/nereid_python/engines/tensorrt/convert.py with the TensorRT that `nereid tensorrt setup` found. With
 * `--config`, also writes the config.pbtxt Triton would auto-complete from the plan.
 */

export const CONVERT_HELP = `Usage: nereid convert --onnx MODEL.onnx [--output PATH] [options]

Builds a TensorRT plan from an ONNX model (trtexec's flag names are accepted too).
  --onnx PATH                 the ONNX model (trtexec: --onnx)
  --output PATH               where to write the plan (default model.plan; trtexec: --saveEngine)
  --min-shapes SPEC           e.g. input_ids:1x512,attention_mask:1x512 (trtexec: --minShapes)
  --opt-shapes SPEC           (trtexec: --optShapes)
  --max-shapes SPEC           (trtexec: --maxShapes); an input with dynamic dims needs all three
  --fp16 | --bf16             half precision (TensorRT 10: builder flag; TensorRT 11: the ONNX model's weights and
                              activations are converted, then the network is built strongly typed)
  --int8 --calib FILE         INT8 from a calibration cache (TensorRT 10 only; TensorRT 11 needs a Q/DQ model)
  --workspace MIB             builder workspace limit in MiB (trtexec: --memPoolSize=workspace:MIB)
  --version-compatible        a plan later TensorRT versions can run (trtexec: --versionCompatible); it embeds
                              the lean runtime, host code the serving runtime must be allowed to run
  --exclude-lean-runtime      with --version-compatible: leave the lean runtime out (the serving TensorRT's
                              own is used; trtexec: --excludeLeanRuntime)
  --timing-cache FILE         read and update a timing cache (trtexec: --timingCacheFile)
  --config [PATH]             also write the config.pbtxt auto-complete would give (default: <model>/config.pbtxt
                              when the output is <model>/<version>/model.plan)
  --model-name NAME           the name in that config (default: the model folder's name)
  --device N                  the GPU to build on (default 0)
  --python PY                 the Python with TensorRT (default: what 'nereid tensorrt setup' recorded)
  --inputIOFormats SPEC        the plan's input types, trtexec's form: type:format per input in the model's input
                              order, or one for all (e.g. int32:chw,int32:chw,int32:chw). Types fp32 fp16 bf16 int32
                              int64 int8 uint8 bool; format chw (linear: the only layout Nereid serves)
  --outputIOFormats SPEC      the same for outputs (e.g. fp16:chw)
`;

const IO_TYPES = new Set(['fp32', 'fp16', 'bf16', 'int32', 'int64', 'int8', 'uint8', 'bool']);
/** trtexec's names of the linear layout; the vectorized ones (hwc8, chw32...) are for image kernels. */
const LINEAR_FORMATS = new Set(['chw', 'linear', 'dhw', 'hw', 'w']);

/** trtexec's `--inputIOFormats=int32:chw,int32:chw` (formats joined by `+` pick among several: one only here). */
export function parseIOFormats(flag: string, raw: string): IOFormat[] {
  return raw
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '')
    .map((p) => {
      const [dtype, format = 'chw', extra] = p.toLowerCase().split(':');
      if (extra !== undefined || !IO_TYPES.has(dtype)) {
        throw new InvalidArgError(
          `--${flag}: '${p}' is not type:format (types: ${[...IO_TYPES].join(', ')}; format: chw)`,
        );
      }
      if (!LINEAR_FORMATS.has(format)) {
        throw new InvalidArgError(
          `--${flag}: format '${format}' in '${p}' is a vectorized layout; Nereid serves linear tensors only (use chw)`,
        );
      }
      return { dtype: dtype as IOFormat['dtype'], format: 'linear' };
    });
}

export interface ConvertArgs {
  spec: ConvertSpec;
  config: string | undefined;
  modelName: string | undefined;
  python: string | undefined;
  notes: string[];
}

const ALIASES: Record<string, string> = {
  saveEngine: 'output',
  minShapes: 'min-shapes',
  optShapes: 'opt-shapes',
  maxShapes: 'max-shapes',
  timingCacheFile: 'timing-cache',
  versionCompatible: 'version-compatible',
  vc: 'version-compatible',
  excludeLeanRuntime: 'exclude-lean-runtime',
};
const BOOLEAN = new Set(['fp16', 'bf16', 'int8', 'version-compatible', 'exclude-lean-runtime']);
const VALUED = new Set([
  'onnx',
  'output',
  'min-shapes',
  'opt-shapes',
  'max-shapes',
  'calib',
  'workspace',
  'memPoolSize',
  'timing-cache',
  'model-name',
  'device',
  'python',
  'inputIOFormats',
  'outputIOFormats',
]);

/** The flags as given: `--name=value`, `--name value`, booleans; `--config` takes an optional value. */
function readFlags(argv: readonly string[]): Record<string, string | true> {
  const v: Record<string, string | true> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--?([A-Za-z0-9-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m) throw new InvalidArgError(`unexpected argument '${argv[i]}' (see nereid convert --help)`);
    const name = ALIASES[m[1]] ?? m[1];
    if (name === 'config') {
      const next = argv[i + 1];
      v.config = m[2] ?? (next !== undefined && !next.startsWith('-') ? (i++, next) : true);
      continue;
    }
    if (BOOLEAN.has(name)) {
      if (m[2] !== undefined) throw new InvalidArgError(`--${name} takes no value`);
      v[name] = true;
      continue;
    }
    if (!VALUED.has(name)) throw new InvalidArgError(`unknown option '--${m[1]}' (see nereid convert --help)`);
    const value = m[2] ?? argv[++i];
    if (value === undefined || value === '') throw new InvalidArgError(`--${m[1]} needs a value`);
    v[name] = value;
  }
  return v;
}

export function parseConvertArgs(argv: readonly string[]): ConvertArgs {
  const v = readFlags(argv);
  const notes: string[] = [];
  const onnx = v.onnx;
  if (typeof onnx !== 'string') throw new InvalidArgError('--onnx MODEL.onnx is required (see nereid convert --help)');
  if (v.fp16 && v.bf16) throw new InvalidArgError('--fp16 and --bf16 exclude each other');
  if (v['exclude-lean-runtime'] && !v['version-compatible']) {
    throw new InvalidArgError('--exclude-lean-runtime applies to version-compatible plans: add --version-compatible');
  }
  if (v.int8 && typeof v.calib !== 'string') {
    throw new InvalidArgError('--int8 needs --calib=<calibration cache> (Nereid does not calibrate by itself)');
  }
  const mins = typeof v['min-shapes'] === 'string' ? parseShapes('--min-shapes', v['min-shapes']) : new Map();
  const opts = typeof v['opt-shapes'] === 'string' ? parseShapes('--opt-shapes', v['opt-shapes']) : new Map();
  const maxs = typeof v['max-shapes'] === 'string' ? parseShapes('--max-shapes', v['max-shapes']) : new Map();
  const shapes: ConvertSpec['shapes'] = {};
  for (const name of new Set([...mins.keys(), ...opts.keys(), ...maxs.keys()])) {
    const min = mins.get(name) ?? opts.get(name) ?? maxs.get(name);
    const opt = opts.get(name) ?? maxs.get(name) ?? min;
    const max = maxs.get(name) ?? opt;
    const missing = ['min', 'opt', 'max'].filter((_, k) => ![mins, opts, maxs][k].has(name));
    if (missing.length > 0)
      notes.push(`input '${name}': no --${missing.join('/--')}-shapes given; using the others (as trtexec does)`);
    shapes[name] = { min: min as number[], opt: opt as number[], max: max as number[] };
  }
  let workspace: number | undefined;
  const ws =
    v.workspace ??
    (typeof v.memPoolSize === 'string' ? /^workspace:(\d+)(?:M|MiB)?$/i.exec(v.memPoolSize)?.[1] : undefined);
  if (ws !== undefined) {
    workspace = Number(ws);
    if (!Number.isSafeInteger(workspace) || workspace <= 0)
      throw new InvalidArgError(`--workspace=${String(ws)}: expected MiB > 0`);
  }
  const ioFormats: NonNullable<ConvertSpec['io_formats']> = {};
  if (typeof v.inputIOFormats === 'string') ioFormats.inputs = parseIOFormats('inputIOFormats', v.inputIOFormats);
  if (typeof v.outputIOFormats === 'string') ioFormats.outputs = parseIOFormats('outputIOFormats', v.outputIOFormats);
  const device = v.device === undefined ? 0 : Number(v.device);
  if (!Number.isSafeInteger(device) || device < 0)
    throw new InvalidArgError(`--device=${String(v.device)}: expected a GPU index`);
  const output = resolve(typeof v.output === 'string' ? v.output : 'model.plan');
  return {
    spec: {
      onnx: resolve(onnx),
      output,
      shapes,
      precision: v.fp16 ? 'fp16' : v.bf16 ? 'bf16' : 'fp32',
      int8: v.int8 === true,
      calibration_cache: typeof v.calib === 'string' ? resolve(v.calib) : undefined,
      workspace_mib: workspace,
      version_compatible: v['version-compatible'] === true,
      ...(v['exclude-lean-runtime'] === true ? { exclude_lean_runtime: true } : {}),
      timing_cache: typeof v['timing-cache'] === 'string' ? resolve(v['timing-cache']) : undefined,
      device,
      ...(ioFormats.inputs || ioFormats.outputs ? { io_formats: ioFormats } : {}),
    },
    config: v.config === undefined ? undefined : v.config === true ? defaultConfigPath(output) : resolve(v.config),
    modelName: typeof v['model-name'] === 'string' ? v['model-name'] : undefined,
    python: typeof v.python === 'string' ? v.python : undefined,
    notes,
  };
}

/** `<repo>/<model>/<version>/model.plan` -> `<repo>/<model>/config.pbtxt`. */
function defaultConfigPath(output: string): string {
  const versionDir = dirname(output);
  if (!/^\d+$/.test(basename(versionDir))) {
    throw new InvalidArgError(
      `--config without a path needs --output <model>/<version>/model.plan (got '${output}'); or give --config PATH`,
    );
  }
  return join(dirname(versionDir), 'config.pbtxt');
}

/** Runs the Python builder; progress lines go to `io.err` as they come. */
export function runBuilder(
  env: TensorRTEnvironment,
  spec: ConvertSpec,
  io: CommandIo,
): Promise<Record<string, unknown>> {
  return buildPlan(env, spec, (l) => io.err(`${l}\n`));
}

/** `nereid convert <argv>`; returns the exit code (0 built, 1 could not build, 2 bad usage). */
export async function runConvert(
  argv: readonly string[],
  io: CommandIo = STDIO,
  extra: {
    pythonPath?: readonly string[];
    env?: Record<string, string>;
    /** Why there is no GPU (undefined: there is one); tests stand in for NVML with it. */
    noGpu?: () => Promise<string | undefined>;
  } = {},
): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    io.out(CONVERT_HELP);
    return 0;
  }
  let args: ConvertArgs;
  try {
    args = parseConvertArgs(argv);
  } catch (e) {
    io.err(`nereid convert: ${(e as Error).message}\n`);
    return 2;
  }
  for (const n of args.notes) io.err(`nereid convert: note: ${n}\n`);
  if (!existsSync(args.spec.onnx)) {
    io.err(`nereid convert: ONNX model '${args.spec.onnx}' does not exist\n`);
    return 2;
  }
  // TensorRT builds a plan on the GPU it is for: without one, nothing else is worth saying (or installing).
  const noGpu = await (extra.noGpu ?? noGpuReason)();
  if (noGpu !== undefined) {
    io.err(
      `nereid convert: no GPU on this machine (${noGpu}): TensorRT builds a plan on the GPU it will run on, so run nereid convert on a machine with an NVIDIA GPU and its driver ('nereid gpu check' says what this one has); nothing was installed or built\n`,
    );
    return 1;
  }
  const o = backendOptions(args.python ? { 'python-executable': args.python } : {});
  const env = resolveEnvironment(o, extra.pythonPath ?? [], extra.env ?? {});
  try {
    const built = await runBuilder(env, args.spec, io);
    io.out(
      `wrote ${String(built.plan)} (${String(built.bytes)} bytes, TensorRT ${String(built.trt_version)}, ${String(built.precision)}, ${String(built.seconds)} s)\n`,
    );
    if (args.config !== undefined) {
      const facts = await probePlan(args.spec.output, env, {
        device: args.spec.device,
        versionCompatible: args.spec.version_compatible,
        plugins: [],
        timeoutMs: o.startTimeoutMs,
      });
      const name = args.modelName ?? basename(dirname(dirname(args.spec.output)));
      const base: ModelConfig = { name, platform: 'tensorrt_plan' };
      const warnings: string[] = [];
      const completed = completeFromPlan(base, facts, name, (w) => warnings.push(w));
      for (const w of warnings) io.err(`nereid convert: note: ${w}\n`);
      await writeFile(args.config, printModelConfig(completed));
      io.out(`wrote ${args.config} (what auto-complete gives; a missing config.pbtxt gives the same)\n`);
    }
    return 0;
  } catch (e) {
    io.err(`nereid convert: ${(e as Error).message}\n`);
    return 1;
  }
}
