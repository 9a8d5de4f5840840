import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BackendConfig } from '../../src/backends/contract.js';

/**
 * The interpreter the pytorch tests run TorchScript with, and the models they use (made here by
 * test/fixtures/pytorch/make_models.py: no binary model is committed).
 *
 * The interpreter is the one the pytorch backend picks by default (the repository .venv, where
 * `bash scripts/setup-python.sh --torch` installs torch), or NEREID_TORCH_PYTHON. Without torch there, the tests
 * are skipped with that reason, except under CI (CI=true), which installs torch and must run them: there a missing
 * torch fails the tests.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAKE_MODELS = join(ROOT, 'test', 'fixtures', 'pytorch', 'make_models.py');

export interface TorchPython {
  python: string;
  /** Why the tests cannot run (no torch), or undefined when they can. */
  missing: string | undefined;
  /** `--backend-config=pytorch,...` the tests pass (python-executable when NEREID_TORCH_PYTHON picks one). */
  backendConfig: BackendConfig;
}

let found: TorchPython | undefined;

export function torchPython(): TorchPython {
  if (found !== undefined) return found;
  const override = process.env.NEREID_TORCH_PYTHON;
  const venv = join(ROOT, '.venv', 'bin', 'python');
  const python = override ?? (existsSync(venv) ? venv : 'python3');
  const r = spawnSync(python, ['-c', 'import numpy, torch; print(torch.__version__)'], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  const missing =
    r.status === 0
      ? undefined
      : `torch is not importable by ${python} (${(r.stderr || r.error?.message || '').trim().split('\n').pop()}): run 'bash scripts/setup-python.sh --torch'`;
  if (missing !== undefined && process.env.CI === 'true') {
    throw new Error(`CI must run the pytorch tests, but ${missing}`);
  }
  found = { python, missing, backendConfig: override ? { 'python-executable': override } : {} };
  return found;
}

/** Makes the test repository (see make_models.py) in a new temporary folder and returns its path. */
export function makeTorchModels(python: string): string {
  const out = mkdtempSync(join(tmpdir(), 'nereid-torch-models-'));
  const r = spawnSync(python, [MAKE_MODELS, out], { encoding: 'utf8', timeout: 300_000 });
  if (r.status !== 0) throw new Error(`make_models.py failed: ${r.stderr || r.error?.message}`);
  return out;
}

/**
 * An interpreter that has numpy but no torch (the pytorch tests' "missing torch" case): the real stub, with
 * `import torch` made to fail the way a missing package does. It takes the backend's `-m nereid_python` itself.
 */
export function pythonWithoutTorch(python: string, dir: string): string {
  const path = join(dir, 'python-without-torch');
  const script = `#!/bin/sh\nexec "${python}" -c "import sys, runpy; sys.modules['torch'] = None; sys.argv = ['nereid_python'] + sys.argv[3:]; runpy.run_module('nereid_python', run_name='__main__', alter_sys=True)" "$@"\n`;
  writeFileSync(path, script, { mode: 0o755 });
  return path;
}
