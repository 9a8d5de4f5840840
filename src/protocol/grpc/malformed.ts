import type { ServiceDefinition } from '@grpc/grpc-js';
import { InvalidArgError } from '../../core/errors.js';

/**
 * A request message that is not valid protobuf is the client's mistake. grpc-js answers a deserializer that throws
 * with INTERNAL ("Error deserializing request"), a server error for a client error; so the service is registered
 * with deserializers that never throw: a message that fails to decode becomes a marker, and the handlers
 * (`unary` in handlers.ts, `inferOnce` in infer.ts, per message on a stream) answer it INVALID_ARGUMENT.
 */

const MALFORMED = Symbol('malformed gRPC request');

interface Malformed {
  readonly [MALFORMED]: string;
}

/** `def` with every request deserializer made total (see above). */
export function tolerantService(def: ServiceDefinition): ServiceDefinition {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(def)) {
    out[name] = {
      ...method,
      requestDeserialize(bytes: Buffer): unknown {
        try {
          return method.requestDeserialize(bytes);
        } catch (err) {
          const marker: Malformed = { [MALFORMED]: (err as Error).message };
          return marker;
        }
      },
    };
  }
  return out as ServiceDefinition;
}

/** Throws INVALID_ARG when `request` is the marker of a message that failed to decode. */
export function rejectMalformed(request: unknown): void {
  if (typeof request === 'object' && request !== null && MALFORMED in request) {
    throw new InvalidArgError(`failed to parse the request message: ${(request as Malformed)[MALFORMED]}`);
  }
}
