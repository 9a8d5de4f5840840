import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { boolWord } from './bool-word.js';

describe('boolean words', () => {
  it('takes Triton’s spellings and yes/no, any case, spaces ignored; nothing else', () => {
    for (const w of ['true', 'TRUE', ' on ', '1', 'Yes']) assert.equal(boolWord(w), true, w);
    for (const w of ['false', 'Off', '0', 'no ', 'NO']) assert.equal(boolWord(w), false, w);
    for (const w of ['', 'y', '2', 'truthy', 'enabled', '1.0']) assert.equal(boolWord(w), undefined, w);
  });
});
