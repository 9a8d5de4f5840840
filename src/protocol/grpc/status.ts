import { Metadata, status as Status, type StatusObject } from '@grpc/grpc-js';
import type { Logger } from '../../core/logger.js';
import { errorForClient } from '../kserve/client-error.js';
import { grpcStatusOf } from '../kserve/status.js';

/** A gRPC status as grpc-js takes it from a unary callback or a stream's `emit('error')`. */
export type GrpcStatus = Pick<StatusObject, 'code' | 'details' | 'metadata'>;

/**
 * A lone UTF-16 surrogate (from a client's own string echoed in a message: a model name, a key) made grpc-js's
 * `encodeURI(details)` throw inside its status writer, an uncaught exception that ended the process. Each one
 * becomes U+FFFD.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function wellFormed(text: string): string {
  return text.replace(LONE_SURROGATE, '\uFFFD');
}

/**
 * The one place a handler error becomes a gRPC status (Triton: GrpcStatusUtil::Create). Codes come from the
 * shared ErrorCode table; an error we did not raise on purpose is logged with an id and its cause and answered as
 * INTERNAL with a generic message naming that id (kserve/client-error.ts).
 */
export function toStatus(err: unknown, logger: Logger, rpc: string): GrpcStatus {
  const e = errorForClient(err, logger, { protocol: 'grpc', rpc });
  return { code: grpcStatusOf(e.code), details: wellFormed(e.message), metadata: new Metadata() };
}

/**
 * A call's error once its deadline has passed: DEADLINE_EXCEEDED, whatever stopped the work. The request was
 * aborted by the deadline (callSignal's timer) and failed CANCELLED; which of that timer and grpc-js's own answer
 * first is a race, and the client must see the one status its deadline means either way.
 */
export function callStatus(
  call: { getDeadline(): Date | number },
  err: unknown,
  logger: Logger,
  rpc: string,
): GrpcStatus {
  const status = toStatus(err, logger, rpc);
  const deadline = call.getDeadline();
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  if (status.code === grpcStatusOf('CANCELLED') && Number.isFinite(at) && Date.now() >= at) {
    return { code: Status.DEADLINE_EXCEEDED, details: 'Deadline Exceeded', metadata: new Metadata() };
  }
  return status;
}

/** The message of an error as a stream's `error_message` carries it (no code: Triton sends text only). */
export function errorMessage(err: unknown, logger: Logger, rpc: string): string {
  return toStatus(err, logger, rpc).details;
}
