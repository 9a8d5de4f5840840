import type { ServiceDefinition } from '@grpc/grpc-js';
import type { Lease } from '../../core/lease.js';

/**
 * A ModelInfer response whose raw contents view an engine's lent memory (core/lease.ts) instead of copies: grpc-js
 * serializes the message into the one buffer it writes, and that copy is the only one; the lease goes back as soon
 * as the serializer returned. A call cancelled before its response was serialized never serializes it: its lease
 * goes back with the call's 'cancelled' event (infer.ts; grpc-js emits it when the call's stream closes, after a
 * sent answer too), so a lease is never held past its call. Both may run: the lease is idempotent.
 */

const LEASE = Symbol('lent response');

interface Lent {
  [LEASE]?: Lease;
}

/** Marks `msg` as viewing memory under `lease`, given back once the message is serialized. */
export function lendTo(msg: object, lease: Lease): void {
  (msg as Lent)[LEASE] = lease;
}

/** Gives back the lease of `msg`, if it has one (its call ended without serializing it). */
export function releaseLent(msg: unknown): void {
  if (typeof msg === 'object' && msg !== null) (msg as Lent)[LEASE]?.release();
}

/** `def` with every response serializer giving the lease of the message it serialized back. */
export function releasingService(def: ServiceDefinition): ServiceDefinition {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(def)) {
    out[name] = {
      ...method,
      responseSerialize(value: unknown): Buffer {
        try {
          return method.responseSerialize(value);
        } finally {
          releaseLent(value);
        }
      },
    };
  }
  return out as ServiceDefinition;
}
