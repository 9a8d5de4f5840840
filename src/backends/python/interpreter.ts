import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { InvalidArgError, UnavailableError } from '../../core/errors.js';
import type { ModelConfig } from '../../config/model-config.js';
import { ROOT } from '../runtime/process/python-env.js';
import { modelParameter, type PythonOptions } from './options.js';

/**
 * Which Python runs a model, decided once per load:
 * 1. the model's `EXECUTION_ENV_PATH` parameter (Triton's forms: a directory holding an environment, or a packed
 *    `.tar.gz` environment, unpacked once into a cache; `$$TRITON_MODEL_DIRECTORY` is the model's folder and a path
 *    using it must stay inside it);
 * 2. `--backend-config=python,python-executable=PATH`;
 * 3. the repository checkout's `.venv/bin/python` (made by `bash scripts/setup-python.sh`), when present;
 * 4. `python3` from PATH.
 * The stub needs Python >= 3.8 and numpy; it is plain Python, so any such interpreter works (Triton needs its stub
 * rebuilt per Python version).
 */

const execFileP = promisify(execFile);

export interface Interpreter {
  executable: string;
  /** Where the choice came from, for the log line. */
  source: string;
}

export async function resolveInterpreter(
  config: ModelConfig,
  modelDir: string,
  opts: PythonOptions,
): Promise<Interpreter> {
  const envPath = modelParameter(config, 'EXECUTION_ENV_PATH');
  if (envPath !== undefined && envPath !== '') {
    const dir = await executionEnv(envPath, modelDir, config.name ?? '');
    return { executable: envPython(dir, envPath), source: `EXECUTION_ENV_PATH ${envPath}` };
  }
  if (opts.pythonExecutable !== undefined) {
    return { executable: opts.pythonExecutable, source: '--backend-config=python,python-executable' };
  }
  const venv = join(ROOT, '.venv', 'bin', 'python');
  if (existsSync(venv)) return { executable: venv, source: 'the repository .venv' };
  return { executable: 'python3', source: 'PATH' };
}

function envPython(dir: string, envPath: string): string {
  for (const name of ['python3', 'python']) {
    const p = join(dir, 'bin', name);
    if (existsSync(p)) return p;
  }
  throw new InvalidArgError(`EXECUTION_ENV_PATH '${envPath}': no bin/python3 in the environment`);
}

async function executionEnv(raw: string, modelDir: string, model: string): Promise<string> {
  const token = '$$TRITON_MODEL_DIRECTORY';
  let path = raw;
  if (raw.includes(token)) {
    path = resolve(raw.replaceAll(token, modelDir));
    const rel = relative(modelDir, path);
    if (rel.startsWith('..') || isAbsolute(rel)) {
      throw new InvalidArgError(`model '${model}': EXECUTION_ENV_PATH '${raw}' escapes the model directory`);
    }
  } else if (!isAbsolute(raw)) {
    throw new InvalidArgError(`model '${model}': EXECUTION_ENV_PATH '${raw}' must be absolute or start with ${token}`);
  }
  let st;
  try {
    st = await stat(path);
  } catch {
    throw new InvalidArgError(`model '${model}': EXECUTION_ENV_PATH '${path}' does not exist`);
  }
  if (st.isDirectory()) return path;
  if (!/\.(tar\.gz|tgz)$/.test(path)) {
    throw new InvalidArgError(
      `model '${model}': EXECUTION_ENV_PATH '${path}' is neither a directory nor a .tar.gz archive`,
    );
  }
  // Unpacked once per archive content (path, size, mtime), into a cache shared by every model that uses it.
  const key = createHash('sha256').update(`${path}\0${st.size}\0${st.mtimeMs}`).digest('hex').slice(0, 16);
  const dir = join(tmpdir(), 'nereid-python-envs', key);
  if (existsSync(dir)) return dir;
  const tmp = `${dir}.${process.pid}.tmp`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  try {
    await execFileP('tar', ['-xzf', path, '-C', tmp]);
    await rename(tmp, dir);
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    if (existsSync(dir)) return dir; // another load unpacked it meanwhile
    throw new UnavailableError(`model '${model}': cannot unpack EXECUTION_ENV_PATH '${path}': ${(e as Error).message}`);
  }
  return dir;
}
