import assert from 'node:assert/strict';
import { readdir, rm } from 'node:fs/promises';
import { after, before, describe, it, type TestContext } from 'node:test';
import { EXAMPLES } from '../helpers/server.js';
import { fuzzCache } from './fuzz-cache.js';
import { report, SEED, type Tally } from './fuzz-harness.js';
import { writeFuzzRepo } from './fuzz-repo.js';
import { fuzzSequences } from './fuzz-sequences.js';
import { fuzzShm, makeShmFiles, type ShmFiles } from './fuzz-shm.js';
import { fuzzStreams } from './fuzz-streams.js';
import { Rng } from './mutate.js';
import { startServerProcess, type ServerProcess } from './server-process.js';

/**
 * The hardening run over the server's state: decoupled streams, sequences, the response cache and client shared
 * memory, each a family of mutated requests (fuzz-*.ts) with well-formed requests among them whose answers are
 * checked, against one `nereid serve` child process. The same failures as fuzz.test.ts (a 5xx or INTERNAL for a
 * client's error, a hang, a crash), plus any wrong answer to a well-formed request. Seeded (NEREID_FUZZ_SEED);
 * NEREID_FUZZ_STATEFUL sets the requests per family (250: about 1,000 in all).
 */

const PER_FAMILY = Number(process.env.NEREID_FUZZ_STATEFUL ?? 250);

describe('Hardening fuzz (streams, sequences, response cache, shared memory)', () => {
  let server: ServerProcess;
  let repo: string;
  let files: ShmFiles;
  before(async () => {
    repo = await writeFuzzRepo();
    files = await makeShmFiles();
    server = await startServerProcess([
      `--model-repository=${repo}`,
      `--model-repository=${EXAMPLES}`,
      '--model-control-mode=explicit',
      ...['simple', 'fanout', 'acc', 'cached'].map((m) => `--load-model=${m}`),
      '--allow-client-shm=true',
      '--cache-config=local,size=65536',
      '--exit-timeout-secs=2',
    ]);
  });
  after(async () => {
    await server?.stop();
    await files?.remove();
    if (repo) await rm(repo, { recursive: true, force: true });
  });

  const check = (t: TestContext, name: string, tally: Tally, seed: number): void => {
    report(t, server, name, tally, seed);
    assert.equal(server.exited(), undefined, `the server exited:\n${server.logs().slice(-3000)}`);
    assert.deepEqual(tally.failures.slice(0, 20), [], `server log:\n${server.logs().slice(-3000)}`);
  };

  it('decoupled streams (gRPC ModelStreamInfer, HTTP generate_stream): every stream ends, answers intact', async (t) => {
    check(t, 'streams', await fuzzStreams(server, new Rng(SEED + 10), PER_FAMILY), SEED + 10);
  });

  it('sequences: mutated sequence parameters never reach another sequence state', async (t) => {
    check(t, 'sequences', await fuzzSequences(server, new Rng(SEED + 11), PER_FAMILY), SEED + 11);
  });

  it('response cache: every 200 is the answer to the request that was sent', async (t) => {
    check(t, 'cache', await fuzzCache(server, new Rng(SEED + 12), PER_FAMILY), SEED + 12);
    const stats = (await (await fetch(`${server.httpUrl}/v2/models/cached/stats`)).json()) as {
      model_stats: { inference_stats: { cache_hit: { count: number } } }[];
    };
    assert.ok(stats.model_stats[0].inference_stats.cache_hit.count > 0, 'the cache answered some requests');
  });

  it('shared memory: mutated register/status/unregister and regions in infers', async (t) => {
    check(t, 'shm', await fuzzShm(server, new Rng(SEED + 13), PER_FAMILY, files), SEED + 13);
    assert.doesNotMatch(server.logs(), /unexpected error \(id/, 'no internal error was logged');
  });

  it("shared memory: the server's own /dev/shm segments cannot be registered (issue 22 item 1)", async () => {
    const own = (await readdir('/dev/shm')).filter((f) => f.startsWith('nereid_python_'));
    assert.ok(own.length > 0, 'the python model has segments');
    for (const [i, name] of own.entries()) {
      const res = await fetch(`${server.httpUrl}/v2/systemsharedmemory/region/own${i}/register`, {
        method: 'POST',
        body: JSON.stringify({ key: `/${name}`, offset: 0, byte_size: 64 }),
      });
      assert.equal(res.status, 400, name);
    }
  });
});
