import { InvalidArgError, NereidError } from '../core/errors.js';
import { helpExitCode, STDIO, type CommandIo } from './command-io.js';
import { runCheck } from '../tools/onnxruntime-gpu/check.js';
import { ORT_LIB_DIR_ENV } from '../tools/onnxruntime-gpu/providers.js';
import { runSetup } from '../tools/onnxruntime-gpu/setup.js';

/** `nereid gpu …`: set-up and check of the GPU libraries. Exit codes: 0 ready, 1 something missing, 2 bad call. */

export const GPU_HELP = `Usage:
  nereid gpu setup [--wheel PATH] [--python PY] [--target DIR]
      Installs onnxruntime-gpu's CUDA (and TensorRT) provider libraries, of the version matching onnxruntime-node,
      beside onnxruntime-node's libonnxruntime.so.1, then checks that the CUDA and cuDNN libraries they need resolve
      and says how to get those that do not.
      --wheel PATH   use this onnxruntime-gpu wheel instead of downloading one with pip
      --python PY    the Python whose pip downloads the wheel (default: python3, then python)
      --target DIR   install into DIR (default: onnxruntime-node's folder, or $${ORT_LIB_DIR_ENV})
  nereid gpu check [--python PY] [--target DIR]
      Reports the NVIDIA driver and GPUs (NVML), the provider libraries installed, and what is missing.

Exit status: 0 ready, 1 something is missing (listed), 2 bad usage.
`;

const OPTIONS: Record<string, readonly string[]> = {
  setup: ['wheel', 'python', 'target'],
  check: ['python', 'target'],
};

/** Parses `--name value` / `--name=value` for the sub-command's options. */
export function parseGpuArgs(sub: string, argv: readonly string[]): Record<string, string> {
  const allowed = OPTIONS[sub];
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!m) throw new InvalidArgError(`unexpected argument '${arg}' (see nereid gpu --help)`);
    const [, name, inline] = m;
    if (!allowed.includes(name)) {
      throw new InvalidArgError(
        `unknown option '--${name}' for 'gpu ${sub}' (options: ${allowed.map((o) => `--${o}`).join(', ')})`,
      );
    }
    const value = inline ?? argv[++i];
    if (value === undefined || value === '' || (inline === undefined && value.startsWith('--'))) {
      throw new InvalidArgError(`--${name} needs a value`);
    }
    out[name] = value;
  }
  return out;
}

/** Runs `nereid gpu <argv>`; returns the exit code. */
export async function runGpuCommand(argv: readonly string[], io: CommandIo = STDIO): Promise<number> {
  const [sub, ...rest] = argv;
  const help = helpExitCode(sub, rest);
  if (help !== undefined) {
    io.out(GPU_HELP);
    return help;
  }
  const print = (line: string): void => io.out(`${line}\n`);
  try {
    if (!(sub in OPTIONS)) throw new InvalidArgError(`unknown gpu command '${sub}' (setup, check)`);
    const o = parseGpuArgs(sub, rest);
    if (sub === 'setup') return await runSetup({ wheel: o.wheel, python: o.python, target: o.target, print });
    return await runCheck({ python: o.python, target: o.target, print });
  } catch (err) {
    const e = NereidError.from(err);
    io.err(`nereid gpu ${sub}: ${e.message}\n`);
    return e.code === 'INVALID_ARG' ? 2 : 1;
  }
}
