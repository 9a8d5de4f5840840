import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { InvalidArgError } from '../../core/errors.js';
import { PYTHON_DIR, ROOT } from '../runtime/process/python-env.js';
import type { TensorRTBackendOptions } from './options.js';

/**
 * Which Python runs TensorRT and with what environment, decided once per load:
 * 1. `--backend-config=tensorrt,python-executable=PATH`;
 * 2. what `nereid tensorrt setup` recorded (`$NEREID_TENSORRT_HOME/env.json`, default
 *    `~/.cache/nereid/tensorrt/env.json`): its interpreter plus the library and module folders of a TensorRT it
 *    assembled (the Maven Central fallback puts libnvinfer in a folder of its own);
 * 3. the repository checkout's `.venv/bin/python`; 4. `python3` from PATH.
 * The interpreter needs numpy, `tensorrt` (or `tensorrt_lean`) and `cuda-bindings`; what is missing is reported by
 * the engine process with what to install.
 */

export interface SetupRecord {
  python: string;
  ld_library_path?: string[];
  python_path?: string[];
  tensorrt_version?: string;
  source?: string;
}

export interface TensorRTEnvironment {
  executable: string;
  /** Where the choice came from, for the log line. */
  source: string;
  env: NodeJS.ProcessEnv;
}

export function tensorrtHome(): string {
  return process.env.NEREID_TENSORRT_HOME ?? join(homedir(), '.cache', 'nereid', 'tensorrt');
}

export function readSetupRecord(home = tensorrtHome()): SetupRecord | undefined {
  const file = join(home, 'env.json');
  if (!existsSync(file)) return undefined;
  let rec: SetupRecord;
  try {
    rec = JSON.parse(readFileSync(file, 'utf8')) as SetupRecord;
  } catch (e) {
    throw new InvalidArgError(
      `${file} (written by 'nereid tensorrt setup') is not valid JSON: ${(e as Error).message}; run the setup again`,
    );
  }
  if (typeof rec.python !== 'string' || rec.python === '') {
    throw new InvalidArgError(`${file} names no python interpreter; run 'nereid tensorrt setup' again`);
  }
  return rec;
}

function join2(front: readonly string[], existing: string | undefined): string {
  return [...front, ...(existing ? [existing] : [])].join(':');
}

/** `extraPythonPath`: folders put first on the child's PYTHONPATH (the tests' TensorRT double). */
export function resolveEnvironment(
  opts: TensorRTBackendOptions,
  extraPythonPath: readonly string[] = [],
  extraEnv: Readonly<Record<string, string>> = {},
): TensorRTEnvironment {
  const record = readSetupRecord();
  let executable: string;
  let source: string;
  if (opts.pythonExecutable !== undefined) {
    executable = opts.pythonExecutable;
    source = '--backend-config=tensorrt,python-executable';
  } else if (record !== undefined) {
    executable = record.python;
    source = `'nereid tensorrt setup' (${join(tensorrtHome(), 'env.json')})`;
  } else if (existsSync(join(ROOT, '.venv', 'bin', 'python'))) {
    executable = join(ROOT, '.venv', 'bin', 'python');
    source = 'the repository .venv';
  } else {
    executable = 'python3';
    source = 'PATH';
  }
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...extraEnv,
    PYTHONPATH: join2([...extraPythonPath, PYTHON_DIR, ...(record?.python_path ?? [])], process.env.PYTHONPATH),
    PYTHONUNBUFFERED: '1',
  };
  if (record?.ld_library_path && record.ld_library_path.length > 0) {
    env.LD_LIBRARY_PATH = join2(record.ld_library_path, process.env.LD_LIBRARY_PATH);
  }
  return { executable, source, env };
}

/** The engine module the stub loads for every TensorRT instance. */
export const ENGINE_MODEL_PY = join(PYTHON_DIR, 'nereid_python', 'engines', 'tensorrt', 'model.py');
