import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import koffi, { type IKoffiLib } from 'koffi';
import { UnavailableError } from '../../../core/errors.js';
import { configureKoffi } from '../../../native/koffi.js';

/**
 * Overrides the folder the onnxruntime library (and its GPU provider libraries) is loaded from, and that
 * `nereid gpu setup` installs into (default: the folder of onnxruntime-node's `libonnxruntime.so.1`). For a
 * relocated onnxruntime, and for tests, which never write into node_modules.
 */
export const ORT_LIB_DIR_ENV = 'NEREID_ORT_LIB_DIR';

export { configureKoffi };

/**
 * Finding and loading onnxruntime's shared library, and koffi's process-wide settings.
 *
 * We load the `libonnxruntime` that onnxruntime-node ships (one library for CPU; the GPU provider libraries of the
 * onnxruntime-gpu wheel are placed beside it by `nereid gpu setup`). onnxruntime looks for
 * `libonnxruntime_providers_*.so` in the folder of the library that was loaded, so the folder is part of the
 * contract: `ortLibraryDir()`.
 */

/** File name of onnxruntime's library in onnxruntime-node's per-platform folder. */
function libraryName(): string {
  if (process.platform === 'linux') return 'libonnxruntime.so.1';
  if (process.platform === 'darwin') return 'libonnxruntime.1.dylib';
  if (process.platform === 'win32') return 'onnxruntime.dll';
  throw new UnavailableError(`onnxruntime's C API is not available on ${process.platform}`);
}

/**
 * The folder holding the onnxruntime library we load. `NEREID_ORT_LIB_DIR` (the GPU set-up's folder) overrides it (a build of
 * onnxruntime with other providers, say); otherwise onnxruntime-node's own copy.
 */
export function ortLibraryDir(): string {
  const override = process.env[ORT_LIB_DIR_ENV];
  if (override !== undefined && override !== '') return override;
  const pkg = createRequire(import.meta.url).resolve('onnxruntime-node/package.json');
  return join(dirname(pkg), 'bin', 'napi-v6', process.platform, process.arch);
}

export function ortLibraryPath(): string {
  return join(ortLibraryDir(), libraryName());
}

let lib: IKoffiLib | undefined;

/** Loads onnxruntime's library once per process (koffi configured first). */
export function loadOrtLibrary(): IKoffiLib {
  if (lib !== undefined) return lib;
  configureKoffi();
  const path = ortLibraryPath();
  if (!existsSync(path)) {
    throw new UnavailableError(
      `onnxruntime's library '${path}' does not exist; reinstall onnxruntime-node (npm ci) or set ` +
        `${ORT_LIB_DIR_ENV} to a folder holding it`,
    );
  }
  try {
    lib = koffi.load(path);
  } catch (err) {
    throw new UnavailableError(`cannot load onnxruntime's library '${path}': ${(err as Error).message}`, {
      cause: err,
    });
  }
  return lib;
}
