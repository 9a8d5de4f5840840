import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { cp, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { EXAMPLES } from '../helpers/server.js';

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

async function nereid(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d));
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

describe('nereid model check', () => {
  it("prints a partial config completed from the ONNX file and the version's state", async () => {
    const r = await nereid(['model', 'check', join(EXAMPLES, 'text_encoder')]);
    assert.equal(r.code, 0, r.stderr);
    // text_encoder's config.pbtxt names no inputs: they come from the model file.
    assert.match(r.stdout, /^name: "text_encoder"$/m);
    assert.match(r.stdout, /input \{\n {2}name: "input_ids"\n {2}data_type: TYPE_INT32/);
    assert.match(r.stdout, /^backend: "onnxruntime"$/m);
    assert.match(r.stderr, /model 'text_encoder' version 1: READY/);
  });

  it('BAD CALL - a config with a mistake exits 1 naming the file, line and column', async () => {
    const dir = join(await mkdtemp(join(tmpdir(), 'nereid-check-')), 'simple');
    await cp(join(EXAMPLES, 'simple'), dir, { recursive: true });
    await writeFile(
      join(dir, 'config.pbtxt'),
      'name: "simple"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\nmax_batch_sise: 4\n',
    );
    const r = await nereid(['model', 'check', dir]);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(
      r.stderr,
      /model 'simple': UNAVAILABLE: [^]*simple\/config\.pbtxt:4:1: unknown field 'max_batch_sise'/,
    );
    assert.match(r.stderr, /max_batch_sise/);
  });

  it('BAD CALL - a path that is not a folder, or no path, exits 2', async () => {
    const missing = await nereid(['model', 'check', '/nonexistent/model']);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /'\/nonexistent\/model' is not a folder/);
    const none = await nereid(['model', 'check']);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /needs a model folder/);
  });
});
