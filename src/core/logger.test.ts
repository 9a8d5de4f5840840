import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from './logger.js';

/** A logger whose JSON lines are collected as text, exactly as written. */
function collect(): { lines: string[]; logger: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  return { lines, logger: createLogger({ write: (l) => lines.push(l) }) };
}

/** How many times `"key":` appears at the top level of a JSON line (JSON.parse would hide a duplicate). */
function keyCount(line: string, key: string): number {
  return line.split(`"${key}":`).length - 1;
}

describe('createLogger', () => {
  it('writes a child binding and the same field of a call once (regression: duplicated "model" key)', () => {
    const { lines, logger } = collect();
    logger.child({ model: 'simple', version: 1 }).warn({ model: 'simple', version: 1 }, 'same fields twice');
    assert.equal(keyCount(lines[0], 'model'), 1, lines[0]);
    assert.equal(keyCount(lines[0], 'version'), 1, lines[0]);
  });

  it("lets a call's field win over the child's binding", () => {
    const { lines, logger } = collect();
    logger.child({ model: 'a' }).child({ version: 2 }).info({ model: 'b' }, 'x');
    const rec = JSON.parse(lines[0]) as Record<string, unknown>;
    assert.equal(rec.model, 'b');
    assert.equal(rec.version, 2);
    assert.equal(keyCount(lines[0], 'model'), 1);
  });

  it('keeps bindings on a message-only call and serializes an Error passed to a child under err', () => {
    const { lines, logger } = collect();
    const child = logger.child({ model: 'm' });
    child.info('plain');
    child.error(new Error('boom'));
    assert.deepEqual([JSON.parse(lines[0]).model, JSON.parse(lines[0]).msg], ['m', 'plain']);
    const rec = JSON.parse(lines[1]) as { err: { message: string; stack: string }; msg: string };
    assert.equal(rec.err.message, 'boom');
    assert.match(rec.err.stack, /logger\.test\.ts/);
    assert.equal(rec.msg, 'boom');
  });

  it('filters by the shared switches, also in children made before a change', () => {
    const { lines, logger } = collect();
    const child = logger.child({ model: 'm' });
    logger.switches.info = false;
    child.info('hidden');
    child.warn('shown');
    assert.deepEqual(
      lines.map((l) => JSON.parse(l).msg),
      ['shown'],
    );
  });
});
