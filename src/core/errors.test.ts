import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ERROR_CLASSES,
  errorFromCompact,
  errorFromData,
  errorToData,
  InternalError,
  NotFoundError,
  type ErrorCode,
} from './errors.js';

describe('errors as data (the one codec threads, processes and pipes use)', () => {
  it('round-trips every code to the same class, message and stack', () => {
    for (const [code, Ctor] of Object.entries(ERROR_CLASSES)) {
      const e = new Ctor(`a ${code} error`);
      const back = errorFromData(structuredClone(errorToData(e)));
      assert.ok(back instanceof Ctor, code);
      assert.equal(back.code, code);
      assert.equal(back.message, `a ${code} error`);
      assert.equal(back.stack, e.stack);
    }
  });

  it('an unexpected error stays unexpected and keeps its cause for the log', () => {
    const back = errorFromData(structuredClone(errorToData(new TypeError('x is not a function'))));
    assert.ok(back instanceof InternalError);
    assert.equal(back.unexpected, true);
    assert.equal((back.cause as Error).name, 'TypeError');
    assert.equal((back.cause as Error).message, 'x is not a function');
  });

  it("a Python process's {c, m}: its code's class; an unknown code or nothing at all as the caller says", () => {
    assert.ok(errorFromCompact({ c: 'NOT_FOUND', m: 'no such model' }, 'x') instanceof NotFoundError);
    const odd = errorFromCompact({ c: 'WHATEVER', m: 'odd' }, 'x', 'UNAVAILABLE');
    assert.equal(odd.code, 'UNAVAILABLE' satisfies ErrorCode);
    assert.equal(odd.message, 'odd');
    const none = errorFromCompact(undefined, 'the child sent no error');
    assert.equal(none.code, 'INTERNAL');
    assert.equal(none.message, 'the child sent no error');
  });
});
