import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { EXAMPLES } from '../helpers/server.js';
import { GRPC_TEMPLATES } from './fuzz-grpc-cases.js';
import { grpcClient, HANG_MS, newTally, pool, report, count, SEED, sendGrpc, sendHttp } from './fuzz-harness.js';
import { httpCase, rawExchange, RAW_CASES } from './fuzz-http-cases.js';
import { mutateValue, Rng } from './mutate.js';
import { startServerProcess, type ServerProcess } from './server-process.js';

/**
 * The hardening run over the stateless surface: a few thousand mutated requests over HTTP and gRPC against
 * `nereid serve` in a child process (the example models, every extension endpoint). It fails on any answer that
 * blames the server for a client's error (HTTP 500/502/503/504, gRPC INTERNAL or UNKNOWN), on any request that
 * hangs (no answer in 10 s), and on a crash (the process exits). Streams, sequences, the response cache and shared
 * memory have their own run (fuzz-stateful.test.ts). Seeded: NEREID_FUZZ_SEED replays a run, NEREID_FUZZ_HTTP /
 * NEREID_FUZZ_GRPC set the counts.
 */

const HTTP_COUNT = Number(process.env.NEREID_FUZZ_HTTP ?? 2400);
const GRPC_COUNT = Number(process.env.NEREID_FUZZ_GRPC ?? 1200);

describe('Hardening fuzz (HTTP and gRPC, mutated requests)', () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServerProcess([
      `--model-repository=${EXAMPLES}`,
      '--model-control-mode=explicit',
      '--load-model=*',
      '--allow-client-shm=true',
      '--http-max-input-size=4194304',
      '--max-response-bytes=8388608',
      '--exit-timeout-secs=2',
    ]);
  });
  after(() => server.stop());

  it('HTTP: no 5xx for a client error, no hang, no crash', async (t) => {
    const tally = newTally();
    const rng = new Rng(SEED);
    const cases = Array.from({ length: HTTP_COUNT }, () => httpCase(rng));
    await pool(cases.length, async (i) => void (await sendHttp(server.httpUrl, cases[i], tally)));
    for (const text of RAW_CASES) {
      tally.sent++;
      const reply = await rawExchange(Number(new URL(server.httpUrl).port), text).catch(
        (e: Error) => `ERR ${e.message}`,
      );
      const status = /^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1] ?? (reply.startsWith('ERR') ? reply : 'closed');
      count(tally, status);
      if (/^5\d\d$/.test(status) && status !== '501')
        tally.failures.push(`${status} for raw ${JSON.stringify(text.slice(0, 60))}`);
      if (status.startsWith('ERR')) tally.failures.push(`${status} for raw ${JSON.stringify(text.slice(0, 60))}`);
    }
    report(t, server, 'HTTP', tally);
    assert.equal(server.exited(), undefined, `the server exited:\n${server.logs().slice(-3000)}`);
    assert.deepEqual(tally.failures.slice(0, 20), []);
    assert.equal((await fetch(`${server.httpUrl}/v2/health/live`)).status, 200);
  });

  it('gRPC: no INTERNAL/UNKNOWN for a client error, no hang, no crash', async (t) => {
    assert.equal(server.exited(), undefined, `the server exited:\n${server.logs().slice(-3000)}`);
    const tally = newTally();
    const rng = new Rng(SEED + 1);
    const grpcc = grpcClient(server);
    const { client, defs } = grpcc;
    try {
      await pool(GRPC_COUNT, async () => {
        const [rpc, template] = rng.pick(GRPC_TEMPLATES);
        await sendGrpc(grpcc, rng, rpc, template, tally);
      });

      // A stream of mutated requests: every one answered (response or error_message), in order, none lost.
      const stream = (
        client as unknown as { ModelStreamInfer(): grpc.ClientDuplexStream<object, { error_message: string }> }
      ).ModelStreamInfer();
      const sent = 200;
      const answers: string[] = [];
      const ended = new Promise<void>((resolve, reject) => {
        stream.on('data', (r: { error_message: string }) => answers.push(r.error_message));
        stream.on('end', resolve);
        stream.on('error', reject);
      });
      for (let i = 0; i < sent; i++) {
        const v = mutateValue(rng, GRPC_TEMPLATES[rng.int(2)][1]) as object;
        let ok = true;
        try {
          defs.ModelStreamInfer.requestSerialize(v);
        } catch {
          ok = false; // grpc-js would fail the whole stream client-side: send the well-formed one instead
        }
        stream.write(ok ? v : GRPC_TEMPLATES[0][1]);
      }
      stream.end();
      let hang: NodeJS.Timeout | undefined;
      await Promise.race([
        ended,
        new Promise((_, reject) => (hang = setTimeout(() => reject(new Error('stream hang')), HANG_MS * 2))),
      ]).finally(() => clearTimeout(hang));
      tally.sent += sent;
      count(tally, 'stream-answers');
      assert.equal(answers.length, sent, 'every stream request answered');
      const internal = answers.filter((m) => /internal error \(id/.test(m));
      assert.deepEqual(internal, [], 'no stream request answered as an internal error');
    } catch (err) {
      throw new Error(
        `${(err as Error).message}\nserver exit ${server.exited()}; server log:\n${server.logs().slice(-4000)}`,
      );
    } finally {
      client.close();
    }
    report(t, server, 'gRPC', tally);
    assert.equal(server.exited(), undefined, `the server exited:\n${server.logs().slice(-3000)}`);
    assert.deepEqual(tally.failures.slice(0, 20), []);
    assert.doesNotMatch(server.logs(), /unexpected error \(id/, 'no internal error was logged');
  });
});
