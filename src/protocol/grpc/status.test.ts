import assert from 'node:assert/strict';
import { status as Status } from '@grpc/grpc-js';
import { describe, it } from 'node:test';
import { CancelledError, InvalidArgError } from '../../core/errors.js';
import { noopLogger } from '../../core/logger.js';
import { callStatus } from './status.js';

describe('gRPC status of a call', () => {
  const past = { getDeadline: () => new Date(Date.now() - 1) };
  const future = { getDeadline: () => new Date(Date.now() + 60_000) };
  const none = { getDeadline: () => Infinity };

  it('REGRESSION a request the deadline stopped is DEADLINE_EXCEEDED, never CANCELLED (issue 22 item 17)', () => {
    const s = callStatus(past, new CancelledError('the client deadline was exceeded'), noopLogger, 'ModelInfer');
    assert.equal(s.code, Status.DEADLINE_EXCEEDED);
    assert.equal(s.details, 'Deadline Exceeded');
  });

  it('a cancellation before the deadline (or with none) stays CANCELLED; other errors keep their code', () => {
    assert.equal(callStatus(future, new CancelledError('x'), noopLogger, 'ModelInfer').code, Status.CANCELLED);
    assert.equal(callStatus(none, new CancelledError('x'), noopLogger, 'ModelInfer').code, Status.CANCELLED);
    assert.equal(callStatus(past, new InvalidArgError('bad'), noopLogger, 'ModelInfer').code, Status.INVALID_ARGUMENT);
  });
});
