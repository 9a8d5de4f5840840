import { InvalidArgError, NotFoundError, UnsupportedError } from '../../core/errors.js';
import { CLIENT_SHM_DISABLED, type SystemSharedMemory } from './regions.js';

/**
 * Triton's cuda_shared_memory extension, as a build without CUDA IPC answers it: status lists nothing, registration
 * is refused with Triton's no-GPU wording (INVALID_ARG, 400), unregistering is a no-op. Nereid does not open
 * cudaIpcMemHandles yet, on any machine; clients use system shared memory or send tensors in the request.
 */
export class CudaSharedMemory {
  readonly #enabled: boolean;
  readonly #system: SystemSharedMemory;

  constructor(opts: { enabled: boolean; system: SystemSharedMemory }) {
    this.#enabled = opts.enabled;
    this.#system = opts.system;
  }

  status(name?: string): { name: string; device_id: number; byte_size: number }[] {
    if (name === undefined || name === '') return [];
    if (this.#system.status().some((r) => r.name === name)) {
      throw new NotFoundError(
        `The region named '${name}' is registered as system shared memory, not CUDA shared memory`,
      );
    }
    throw new NotFoundError(`Unable to find cuda shared memory region: '${name}'`);
  }

  register(name: string): void {
    if (!this.#enabled) throw new UnsupportedError(CLIENT_SHM_DISABLED);
    if (name === '') throw new InvalidArgError("'region name' is necessary to register cuda shared memory region");
    throw new InvalidArgError(
      `failed to register CUDA shared memory region: '${name}', GPUs not supported (Nereid does not open CUDA IPC handles yet; use system shared memory)`,
    );
  }

  unregister(): void {
    if (!this.#enabled) throw new UnsupportedError(CLIENT_SHM_DISABLED);
  }
}
