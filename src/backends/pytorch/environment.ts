import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PYTHON_DIR, ROOT, childEnv } from '../runtime/process/python-env.js';
import type { PyTorchBackendOptions } from './options.js';

/**
 * Which Python runs TorchScript models, decided once per load:
 * 1. `--backend-config=pytorch,python-executable=PATH`;
 * 2. the repository checkout's `.venv/bin/python` (`bash scripts/setup-python.sh --torch` installs torch there);
 * 3. `python3` from PATH.
 * The interpreter needs numpy and torch; a missing torch is reported by the engine process with what to run.
 */

export interface PyTorchEnvironment {
  executable: string;
  /** Where the choice came from, for the log line. */
  source: string;
  env: NodeJS.ProcessEnv;
}

const VENV_PYTHON = join(ROOT, '.venv', 'bin', 'python');

export function resolveEnvironment(opts: PyTorchBackendOptions): PyTorchEnvironment {
  if (opts.pythonExecutable !== undefined) {
    return { executable: opts.pythonExecutable, source: '--backend-config=pytorch,python-executable', env: childEnv() };
  }
  if (existsSync(VENV_PYTHON)) return { executable: VENV_PYTHON, source: 'the repository .venv', env: childEnv() };
  return { executable: 'python3', source: 'PATH', env: childEnv() };
}

/** The engine module the stub loads for every PyTorch instance. */
export const ENGINE_MODEL_PY = join(PYTHON_DIR, 'nereid_python', 'engines', 'pytorch', 'model.py');

/**
 * True when a KIND_GPU instance could run here (Triton's KIND_AUTO rule): the NVIDIA driver lists a GPU, and the
 * repository .venv's torch, when there is one, is a CUDA build (a CPU-only torch there would fail every GPU load).
 * Cheap: no torch import; the instance's own start is the real test.
 */
export function gpuUsable(): boolean {
  try {
    if (readdirSync('/proc/driver/nvidia/gpus').length === 0) return false;
  } catch {
    return false;
  }
  const lib = join(ROOT, '.venv', 'lib');
  try {
    for (const py of readdirSync(lib)) {
      const torchLib = join(lib, py, 'site-packages', 'torch', 'lib');
      if (existsSync(torchLib)) return existsSync(join(torchLib, 'libtorch_cuda.so'));
    }
  } catch {
    // no repository .venv: the interpreter is python3 from PATH, whose torch we cannot see without starting it
  }
  return true;
}
