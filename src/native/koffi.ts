import koffi from 'koffi';
import { UnavailableError } from '../core/errors.js';

/**
 * koffi's settings are process-wide and fixed once any library is loaded, so every module that loads a native
 * library through koffi (onnxruntime's C API, NVML, libc for shared memory) calls configureKoffi() first.
 */

/** koffi's process-wide settings (what onnxruntime's C API needs); applied before the first `koffi.load`. */
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
          `onnxruntime needs ${KOFFI_SETTINGS.async_stack_size}); call configureKoffi() (src/native/koffi.ts) ` +
          `before any koffi.load`,
        { cause: err },
      );
    }
  }
  configured = true;
}
