import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where the Python side of the process transport lives, and the environment every engine process starts with: one
 * place for the python, pytorch and tensorrt engines (and the commands that run their Python helpers).
 */

/** The repository root (this file is src/backends/runtime/process/ or dist/backends/runtime/process/). */
export const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
/** Where `nereid_python` and `triton_python_backend_utils` live; put on the child's PYTHONPATH. */
export const PYTHON_DIR = join(ROOT, 'python');

/** The child's environment: our Python package first on PYTHONPATH, unbuffered prints. */
export function childEnv(): NodeJS.ProcessEnv {
  const existing = process.env.PYTHONPATH;
  return {
    ...process.env,
    PYTHONPATH: existing ? `${PYTHON_DIR}:${existing}` : PYTHON_DIR,
    PYTHONUNBUFFERED: '1',
  };
}
