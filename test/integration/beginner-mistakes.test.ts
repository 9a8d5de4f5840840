/**
 * Issue 26 item 6: a beginner's folder mistakes each get a message of their own. Before, all four ended in
 * "cannot tell which backend runs it … name the file after its backend's default (model.onnx: …)" even when the
 * file was named model.onnx: the backend is sniffed from version folders' files, and there were none.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { EXAMPLES, startNereid } from '../helpers/server.js';

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const ONNX = join(EXAMPLES, 'simple', '1', 'model.onnx');

async function nereid(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--conditions=nereid-source', '--import', 'tsx', MAIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d));
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

/** The reason the repository index gives for `model` (HTTP), from a server started with --exit-on-error=false. */
async function indexReason(root: string, model: string): Promise<string> {
  const s = await startNereid({ repositories: [root], exitOnError: false });
  try {
    const res = await fetch(`${s.url}/v2/repository/index`, { method: 'POST', body: '{}' });
    const rows = (await res.json()) as { name: string; state: string; reason?: string }[];
    const row = rows.find((r) => r.name === model);
    assert.equal(row?.state, 'UNAVAILABLE', JSON.stringify(rows));
    return row?.reason ?? '';
  } finally {
    await s.close();
  }
}

const CANNOT_TELL = /cannot tell which backend/;

describe('beginner mistakes get their own messages', () => {
  const cleanup: string[] = [];
  after(async () => {
    for (const d of cleanup) await rm(d, { recursive: true, force: true });
  });
  const scratch = async (): Promise<string> => {
    const d = await mkdtemp(join(tmpdir(), 'nereid-beginner-'));
    cleanup.push(d);
    return d;
  };

  it('BAD REPOSITORY - a missing version folder: model.onnx beside the config says to move it into 1/', async () => {
    const root = await scratch();
    await mkdir(join(root, 'm'));
    await cp(ONNX, join(root, 'm', 'model.onnx'));
    const reason = await indexReason(root, 'm');
    assert.doesNotMatch(reason, CANNOT_TELL);
    assert.match(reason, /model 'm' has no version folder: m\/model\.onnx must be inside a numbered version folder/);
    assert.match(reason, /m\/1\/model\.onnx/);
    // The same with a config naming the platform (Triton's usual config.pbtxt).
    await cp(join(EXAMPLES, 'simple', 'config.pbtxt'), join(root, 'm', 'config.pbtxt'));
    await assert.rejects(startNereid({ repositories: [root] }), /has no version folder: m\/model\.onnx/);
  });

  it('BAD REPOSITORY - an empty version folder says it is empty and what goes in it', async () => {
    const root = await scratch();
    await mkdir(join(root, 'm', '1'), { recursive: true });
    const reason = await indexReason(root, 'm');
    assert.doesNotMatch(reason, CANNOT_TELL);
    assert.match(reason, /model 'm': version folder m\/1 is empty: put the model file in it, e\.g\. m\/1\/model\.onnx/);
  });

  it('BAD FLAG - a model folder given as --model-repository says so and names the folder to give', async () => {
    const root = await scratch();
    await cp(join(EXAMPLES, 'simple'), join(root, 'simple'), { recursive: true });
    await assert.rejects(
      startNereid({ repositories: [join(root, 'simple')] }),
      (e: Error) =>
        !CANNOT_TELL.test(e.message) &&
        /is a model folder \(it holds config\.pbtxt and version folder 1\/ with model\.onnx\), not a repository/.test(
          e.message,
        ) &&
        e.message.includes(`--model-repository=${root}`),
    );
    const r = await nereid(['serve', `--model-repository=${join(root, 'simple')}`, '--http-port=0', '--grpc-port=0']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /is a model folder/);
    assert.doesNotMatch(r.stderr, CANNOT_TELL);
  });

  it('BAD CALL - the repository root given to nereid model check names its models and the command to run', async () => {
    const r = await nereid(['model', 'check', EXAMPLES]);
    assert.equal(r.code, 2, r.stderr);
    assert.doesNotMatch(r.stderr, CANNOT_TELL);
    assert.match(r.stderr, /is a model repository \(it holds the model folders classifier, simple, text_encoder\)/);
    assert.match(r.stderr, /nereid model check \S+model_repository\/classifier/);
  });
});
