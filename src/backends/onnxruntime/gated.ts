import { CancelledError, UnavailableError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { Backend, Execute, Instance, InstanceSpec, ModelHandle } from '../contract.js';
import { deviceGate } from './device-gate.js';
import { isCaptureCollision } from './instance-graphs.js';

/**
 * The onnxruntime backend's KIND_GPU instances behind their device's gate (device-gate.ts), on both transports: an
 * instance of a model that captures CUDA graphs at load is created alone on its device; every other KIND_GPU
 * instance creation and every KIND_GPU run holds the gate shared. KIND_CPU instances never touch it.
 *
 * A creation that still fails with "stream is capturing" (a capture the gate does not see: another backend's, or a
 * graph a request's new shape made an engine thread capture) is tried again after a pause, with the gate given
 * back meanwhile: such a collision says nothing about the model, and failing the load for it made the whole
 * server exit at start-up. Only after `ATTEMPTS` collisions in a row does the load fail, saying so.
 */

const ATTEMPTS = 8;
const RETRY_PAUSE_MS = 250;

export function gatedOnDevice(backend: Backend, captures: (ctx: Parameters<Backend['load']>[0]) => boolean): Backend {
  return {
    ...backend,
    async load(ctx, signal) {
      const handle = await backend.load(ctx, signal);
      const exclusive = captures(ctx);
      return {
        createInstance: (spec, createSignal) =>
          spec.kind === 'KIND_GPU'
            ? createGated(handle, spec, exclusive, ctx.logger, createSignal)
            : handle.createInstance(spec, createSignal),
        unload: () => handle.unload(),
      };
    },
  };
}

async function createGated(
  handle: ModelHandle,
  spec: InstanceSpec,
  exclusive: boolean,
  logger: Logger,
  signal: AbortSignal | undefined,
): Promise<Instance> {
  const gate = deviceGate(spec.device);
  for (let attempt = 1; ; attempt++) {
    const release = await gate.enter(exclusive, signal);
    let instance: Instance;
    try {
      instance = await handle.createInstance(spec, signal);
    } catch (err) {
      release();
      const message = err instanceof Error ? err.message : String(err);
      if (!isCaptureCollision(message) || signal?.aborted === true) throw err;
      if (attempt >= ATTEMPTS) {
        throw new UnavailableError(
          `instance ${spec.name}: CUDA kept refusing the load because another stream was capturing a CUDA graph (${attempt} attempts): ${message}`,
          { cause: err },
        );
      }
      logger.warn(
        { instance: spec.name, device: spec.device, attempt },
        `instance ${spec.name}: the load met another thread's CUDA graph capture on GPU ${spec.device}; retrying: ${message.slice(0, 200)}`,
      );
      await pause(RETRY_PAUSE_MS * attempt, signal);
      continue;
    }
    release();
    return gatedRuns(instance, spec.device);
  }
}

/** The instance with each execute holding its device's gate shared (no promise unless a capture holds or waits). */
function gatedRuns(instance: Instance, device: number): Instance {
  const gate = deviceGate(device);
  const execute: Execute = async (requests, responder, signal) => {
    const release = gate.tryShared() ?? (await gate.enter(false, signal));
    try {
      return await instance.execute(requests, responder, signal);
    } finally {
      release();
    }
  };
  return {
    name: instance.name,
    execute,
    deviceMemory: instance.deviceMemory,
    died: instance.died,
    destroy: () => instance.destroy(),
  };
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new CancelledError('instance creation was cancelled'));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
