import { InternalError } from '../../core/errors.js';

/**
 * An error after which an instance must not run again (a sticky CUDA error, a corrupted session). An engine
 * rejects `execute` with it; the transport then fails the batch, settles the instance's `died`, and the pool
 * replaces the instance. Any other error fails only its batch.
 */
export class EngineFault extends InternalError {}

/** Builds the INTERNAL error an in-flight request gets when its instance dies: it names the instance and cause. */
export function instanceDied(instance: string, where: string, cause: string): InternalError {
  return new InternalError(`instance ${instance} (${where}) died: ${cause}`);
}
