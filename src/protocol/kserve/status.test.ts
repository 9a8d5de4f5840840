import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ERROR_CLASSES, type ErrorCode } from '../../core/errors.js';
import { grpcStatusOf, httpStatusOf, STATUS_TABLE } from './status.js';

describe('STATUS_TABLE', () => {
  it('maps every error code in the catalogue', () => {
    assert.deepEqual(Object.keys(STATUS_TABLE).sort(), Object.keys(ERROR_CLASSES).sort());
  });

  it("uses Triton's HTTP mapping", () => {
    const expected: Record<ErrorCode, number> = {
      INVALID_ARG: 400,
      UNKNOWN: 400,
      ALREADY_EXISTS: 400,
      CANCELLED: 400,
      NOT_FOUND: 404,
      UNAVAILABLE: 503,
      UNSUPPORTED: 501,
      INTERNAL: 500,
      RESOURCE_EXHAUSTED: 429,
    };
    for (const [code, http] of Object.entries(expected)) assert.equal(httpStatusOf(code as ErrorCode), http, code);
  });

  it("uses Triton's gRPC mapping", () => {
    assert.equal(grpcStatusOf('INVALID_ARG'), 3);
    assert.equal(grpcStatusOf('NOT_FOUND'), 5);
    assert.equal(grpcStatusOf('ALREADY_EXISTS'), 6);
    assert.equal(grpcStatusOf('UNSUPPORTED'), 12);
    assert.equal(grpcStatusOf('INTERNAL'), 13);
    assert.equal(grpcStatusOf('RESOURCE_EXHAUSTED'), 8);
    assert.equal(grpcStatusOf('UNAVAILABLE'), 14);
    assert.equal(grpcStatusOf('CANCELLED'), 1);
    assert.equal(grpcStatusOf('UNKNOWN'), 2);
  });
});
