import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import koffi, { type IKoffiLib } from 'koffi';
import { UnavailableError } from '../../../core/errors.js';

/**
 * Finding and loading onnxruntime's shared library, and koffi's process-wide settings.
 *
 * We load the `libonnxruntime` that onnxruntime-node ships (one library for CPU; the GPU provider libraries of the
 * onnxruntime-gpu wheel are placed beside it by `nereid gpu setup`). onnxruntime looks for
 * `libonnxruntime_providers_*.so` in the folder of the library that was loaded, so the folder is part of the
 * contract: `ortLibraryDir()`.
 */

/** koffi settings every onnxruntime call needs; applied before the first `koffi.load` of the process. */
const KOFFI_SETTINGS = {
  /**
   * koffi runs an `.async` call on its own stack (128 KiB by default), not the libuv thread's. onnxruntime's
   * session creation (graph transformers, protobuf) and a run with `intra_op_thread_count: 1` (kernels on the
   * calling thread) need a normal thread's stack: 8 MiB, Linux's default. Only touched pages become resident.
   */
  async_stack_size: 8 * 1024 * 1024,
  /**
   * Stacks kept between async calls; a call beyond them maps and unmaps a fresh 8 MiB stack. 16 is koffi's
   * maximum and covers 16 instances running at once.
   */
  resident_async_pools: 16,
} as const;

let configured = false;

/**
 * Applies KOFFI_SETTINGS once. koffi refuses settings after any library is loaded in the process: if another
 * module loaded one first, the current settings must already be big enough, else every async onnxruntime call
 * would run on a 128 KiB stack, which we refuse (it overflows silently: koffi's stacks have no guard page).
 */
export function configureKoffi(): void {
  if (configured) return;
  try {
    koffi.config({ ...koffi.config(), ...KOFFI_SETTINGS });
  } catch (err) {
    const current = koffi.config();
    if ((current.async_stack_size ?? 0) < KOFFI_SETTINGS.async_stack_size) {
      throw new UnavailableError(
        `koffi was configured before onnxruntime's C API was loaded (async stack ${current.async_stack_size} bytes, ` +
          `onnxruntime needs ${KOFFI_SETTINGS.async_stack_size}); load koffi libraries through ` +
          `backends/onnxruntime/capi/library.ts's configureKoffi() first`,
        { cause: err },
      );
    }
  }
  configured = true;
}

/** File name of onnxruntime's library in onnxruntime-node's per-platform folder. */
function libraryName(): string {
  if (process.platform === 'linux') return 'libonnxruntime.so.1';
  if (process.platform === 'darwin') return 'libonnxruntime.1.dylib';
  if (process.platform === 'win32') return 'onnxruntime.dll';
  throw new UnavailableError(`onnxruntime's C API is not available on ${process.platform}`);
}

/**
 * The folder holding the onnxruntime library we load. `NEREID_ONNXRUNTIME_LIB_DIR` overrides it (a build of
 * onnxruntime with other providers, say); otherwise onnxruntime-node's own copy.
 */
export function ortLibraryDir(): string {
  const override = process.env.NEREID_ONNXRUNTIME_LIB_DIR;
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
        'NEREID_ONNXRUNTIME_LIB_DIR to a folder holding it',
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
