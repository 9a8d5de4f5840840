import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { violations } from '../../scripts/check-layers.js';

describe('layering check (scripts/check-layers.ts)', () => {
  it("src/ imports only leftwards, as docs/architecture.md's layering line says", () => {
    assert.deepEqual(violations('src'), []);
  });

  it('names an import that runs the wrong way, and one from client/ to anything but core/', () => {
    const root = mkdtempSync(join(tmpdir(), 'nereid-layers-'));
    try {
      const file = (p: string, text: string) => {
        mkdirSync(join(root, p, '..'), { recursive: true });
        writeFileSync(join(root, p), text);
      };
      file('core/a.ts', "import { b } from '../backends/b.js';\n");
      file('backends/b.ts', "import { a } from '../core/a.js';\nexport const b = a;\n");
      file('client/c.ts', "import { s } from '../server/s.js';\n");
      file('server/s.ts', 'export const s = 1;\n');
      const found = violations(root).map((v) => v.replace(/^.*?(core|client)\//, '$1/'));
      assert.deepEqual(found.sort(), [
        "client/c.ts: client -> server ('../server/s.js')",
        "core/a.ts: core -> backends ('../backends/b.js')",
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
