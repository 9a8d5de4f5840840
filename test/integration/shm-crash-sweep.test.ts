import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FIXTURES } from '../helpers/python-models.js';
import { startNereid } from '../helpers/server.js';
import { startServerProcess, type ServerProcess } from '../hardening/server-process.js';

/**
 * REGRESSION (issue 22 item 9): after `kill -9` of a server, its /dev/shm segments stayed until another Nereid
 * started a Python model. A server's start now sweeps them, and never touches those of a server still running.
 */

/** `nereid serve` of a repository holding the Python identity model, in its own process. */
const serveChild = (repo: string): Promise<ServerProcess> =>
  startServerProcess([`--model-repository=${repo}`, '--http-thread-count=1']);

async function infer(url: string): Promise<number> {
  const res = await fetch(`${url}/v2/models/identity/infer`, {
    method: 'POST',
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] }),
  });
  await res.arrayBuffer();
  return res.status;
}

/** The /dev/shm names of one server process: its segments and its owner file. */
async function namesOf(pid: number): Promise<string[]> {
  const mark = new RegExp(`^nereid_(python|owner)_${pid}[x_]`);
  return (await readdir('/dev/shm')).filter((n) => mark.test(n));
}

describe('/dev/shm after a server is killed', () => {
  let repo: string;
  const children: ChildProcess[] = [];
  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-sweep-repo-'));
    await cp(join(FIXTURES, 'identity'), join(repo, 'identity'), { recursive: true });
  });
  after(async () => {
    for (const c of children) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGTERM');
        await once(c, 'exit');
      }
    }
    await rm(repo, { recursive: true, force: true });
  });

  it('REGRESSION - a starting server removes a killed server’s segments and keeps a live one’s', async () => {
    const [live, killed] = [await serveChild(repo), await serveChild(repo)];
    children.push(live.child, killed.child);
    assert.equal(await infer(live.httpUrl), 200);
    assert.equal(await infer(killed.httpUrl), 200);
    const liveNames = await namesOf(live.child.pid!);
    const killedNames = await namesOf(killed.child.pid!);
    // Host-written and stub-written segments, and the owner file, of each.
    for (const names of [liveNames, killedNames]) {
      assert.ok(names.some((n) => n.endsWith('h0')) && names.some((n) => n.endsWith('c0')), names.join());
      assert.ok(
        names.some((n) => n.startsWith('nereid_owner_')),
        names.join(),
      );
    }

    killed.child.kill('SIGKILL');
    await once(killed.child, 'exit');
    assert.deepEqual(await namesOf(killed.child.pid!), killedNames, 'a killed server removes nothing itself');

    // A server with no Python model at all: the sweep is part of every start.
    const s = await startNereid();
    try {
      assert.deepEqual(await namesOf(killed.child.pid!), []);
      assert.deepEqual(await namesOf(live.child.pid!), liveNames);
      assert.equal(await infer(live.httpUrl), 200, 'the live server still serves through its segments');
    } finally {
      await s.close();
    }
  });
});
