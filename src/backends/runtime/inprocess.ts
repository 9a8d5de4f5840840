import type { DeviceMemory } from '../../core/device.js';
import type {
  Backend,
  BackendDescriptor,
  EngineAdapter,
  EngineInstance,
  EngineLoadContext,
  Execute,
  Instance,
  InstanceSpec,
  ModelHandle,
} from '../contract.js';
import { CancelledError } from '../../core/errors.js';
import { EngineFault } from './fault.js';

/**
 * The in-process transport: the engine runs on the main thread. For engines whose work never blocks the event
 * loop (timers, async native calls on libuv's pool). Ownership is trivially kept: nothing is copied or moved.
 */
export function inProcessBackend(
  descriptor: BackendDescriptor & Pick<Backend, 'autoComplete'>,
  adapter: EngineAdapter,
): Backend {
  return {
    ...descriptor,
    async load(ctx: EngineLoadContext, signal?: AbortSignal): Promise<ModelHandle> {
      // In-process, the engine may use the host's logger (ctx.logger) for its own warnings.
      const model = await adapter.load(ctx, signal ?? new AbortController().signal);
      let unloading: Promise<void> | undefined;
      return {
        async createInstance(spec: InstanceSpec, createSignal?: AbortSignal): Promise<Instance> {
          const signal = createSignal ?? new AbortController().signal;
          if (signal.aborted) throw new CancelledError('instance creation was cancelled');
          return new InProcessInstance(spec.name, await model.createInstance(spec, signal));
        },
        unload: () => (unloading ??= model.unload()),
      };
    },
  };
}

class InProcessInstance implements Instance {
  readonly name: string;
  readonly died: Promise<Error>;
  /** In-process, device addresses mean the same to the engine as to the host. */
  readonly deviceMemory: DeviceMemory | undefined;
  readonly #engine: EngineInstance;
  #die!: (e: Error) => void;
  #destroyed: Promise<void> | undefined;

  constructor(name: string, engine: EngineInstance) {
    this.name = name;
    this.#engine = engine;
    this.deviceMemory = engine.deviceMemory;
    this.died = new Promise((resolve) => (this.#die = resolve));
    void engine.died?.then((err) => this.#die(err));
  }

  readonly execute: Execute = async (requests, responder, signal) => {
    try {
      return await this.#engine.execute(requests, responder, signal);
    } catch (err) {
      if (err instanceof EngineFault) this.#die(err);
      throw err;
    }
  };

  destroy(): Promise<void> {
    this.#destroyed ??= this.#engine.destroy();
    return this.#destroyed;
  }
}
