import { InvalidArgError } from '../../core/errors.js';
import type { Backend } from '../contract.js';

/**
 * A backend offered on two transports, chosen per model load by `--backend-config=<backend>,transport=inprocess|thread`
 * (default in-process): the same adapter on the main thread or in an engine thread per instance. `preferThread`
 * lets a backend move a model that needs its own thread there (onnxruntime's CUDA graphs); an unknown value fails
 * the load naming the choices.
 */
export function withThreadTransport(
  name: string,
  inProcess: Backend,
  threaded: Backend,
  preferThread: (ctx: Parameters<Backend['load']>[0]) => boolean = () => false,
): Backend {
  return {
    ...inProcess,
    load(ctx, signal) {
      const transport = ctx.backendConfig.transport ?? 'inprocess';
      if (transport === 'thread') return threaded.load(ctx, signal);
      if (transport !== 'inprocess') {
        return Promise.reject(
          new InvalidArgError(`backend-config ${name},transport must be 'inprocess' or 'thread', got '${transport}'`),
        );
      }
      return preferThread(ctx) ? threaded.load(ctx, signal) : inProcess.load(ctx, signal);
    },
  };
}
