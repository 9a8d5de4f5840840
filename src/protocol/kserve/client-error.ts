import { randomBytes } from 'node:crypto';
import { InternalError, NereidError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import { redactAbsolutePaths, redactedCopy } from '../../server/redact.js';

/**
 * The one rule, shared by HTTP and gRPC, for what a client learns about a failure:
 * - a NereidError raised on purpose keeps its code and message: they were written for the caller, INTERNAL ones
 *   included (`instance simple_0 died: …`, an engine's own error text);
 * - anything else is a bug or an environment failure (a non-NereidError throwable, or the INTERNAL error
 *   NereidError.from() made of one, flagged `unexpected`). Its text may hold a stack, a library's internals or an
 *   absolute server path, so it is logged at error level with a fresh id, its cause and `context`, and the client
 *   gets INTERNAL `internal error (id <8 hex digits>); see the server log`, the id tying the two together;
 * - either way no absolute server path reaches the client (server/redact.ts): the facade already wrote paths relative
 *   to their repository, and anything left keeps only its last segment.
 */
export function errorForClient(err: unknown, logger: Logger, context: Record<string, unknown>): NereidError {
  const e = NereidError.from(err);
  if (!e.unexpected) {
    const message = redactAbsolutePaths(e.message);
    return message === e.message ? e : redactedCopy(e, message);
  }
  const errorId = randomBytes(4).toString('hex');
  logger.error({ ...context, errorId, err: e.cause ?? err }, `unexpected error (id ${errorId})`);
  return new InternalError(`internal error (id ${errorId}); see the server log`);
}
