import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type * as grpc from '@grpc/grpc-js';
import { startServerProcess } from '../hardening/server-process.js';
import { callUnary, fp32Bytes, inferenceClient } from '../helpers/grpc.js';

/**
 * Regression for issue 22, item 8: SIGTERM under steady keep-alive load. The clients' connections were never idle
 * long enough to be closed, so the drain lasted until --exit-timeout-secs, the process then exited with requests
 * unanswered, and the python model's /dev/shm segments stayed. `nereid serve` runs as a real process with the
 * Python example (add_sub: its instance runs in a child process that talks through /dev/shm).
 */

const PY_EXAMPLES = fileURLToPath(new URL('../../examples/python_repository/', import.meta.url));
const EXIT_TIMEOUT_SECS = 20;
const BODY = JSON.stringify({
  inputs: [
    { name: 'INPUT0', shape: [4], datatype: 'FP32', data: [1, 2, 3, 4] },
    { name: 'INPUT1', shape: [4], datatype: 'FP32', data: [1, 1, 1, 1] },
  ],
});

/** /dev/shm entries of the server process: each name carries its owner token, `<pid>x<random>` (process/owner.ts). */
const segmentsOf = (pid: number): string[] =>
  readdirSync('/dev/shm').filter((n) => n.startsWith('nereid') && n.split('_').some((p) => p.startsWith(`${pid}x`)));

interface Tally {
  answered: number;
  /** Requests written whose response never (fully) came. */
  lost: string[];
  /** Responses that asked the client to close the connection. */
  closeHeaders: number;
}

/** One keep-alive HTTP client sending one request after the other until the server refuses the connection. */
async function httpLoop(url: string, tally: Tally): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (;;) {
      const outcome = await new Promise<'ok' | 'refused'>((resolve) => {
        let sent = false;
        const req = request(
          `${url}/v2/models/add_sub/infer`,
          { method: 'POST', agent, headers: { 'content-length': Buffer.byteLength(BODY) } },
          (res) => {
            let got = 0;
            res.on('data', (c: Buffer) => (got += c.length));
            res.on('end', () => {
              if (got === Number(res.headers['content-length'])) tally.answered++;
              else tally.lost.push(`cut body (${got} bytes)`);
              if (res.headers.connection === 'close') tally.closeHeaders++;
              resolve('ok');
            });
            res.on('aborted', () => {
              tally.lost.push('aborted');
              resolve('ok');
            });
          },
        );
        req.on('finish', () => (sent = true));
        req.on('error', (err: NodeJS.ErrnoException) => {
          // A connection refused never carried a request: the listener has closed, the loop is over.
          if (err.code === 'ECONNREFUSED') return resolve('refused');
          tally.lost.push(`${sent ? 'sent' : 'unsent'}: ${err.code ?? err.message}`);
          resolve('refused');
        });
        req.end(BODY);
      });
      if (outcome === 'refused') return;
    }
  } finally {
    agent.destroy();
  }
}

/** One gRPC client calling ModelInfer on its channel until a call fails (UNAVAILABLE once the server stops). */
async function grpcLoop(client: grpc.Client, tally: Tally): Promise<void> {
  for (;;) {
    try {
      await callUnary(client, 'ModelInfer', {
        model_name: 'add_sub',
        inputs: [
          { name: 'INPUT0', datatype: 'FP32', shape: [4] },
          { name: 'INPUT1', datatype: 'FP32', shape: [4] },
        ],
        raw_input_contents: [fp32Bytes([1, 2, 3, 4]), fp32Bytes([1, 1, 1, 1])],
      });
      tally.answered++;
    } catch (err) {
      // An error status is an answer; the loop ends there.
      const code = (err as grpc.ServiceError).code;
      if (code !== 14 && code !== 1) tally.lost.push(`grpc status ${code}: ${(err as Error).message}`);
      return;
    }
  }
}

describe('SIGTERM under steady keep-alive load', () => {
  it('REGRESSION drains once in-flight work is done: every request answered, exits 0, no /dev/shm segment left', async (t) => {
    const server = await startServerProcess([
      '--model-repository',
      PY_EXAMPLES,
      `--exit-timeout-secs=${EXIT_TIMEOUT_SECS}`,
      '--log-verbose=1',
    ]);
    const pid = server.child.pid as number;
    const exited = once(server.child, 'exit') as Promise<[number | null, string | null]>;
    const client = inferenceClient(server.grpcAddress);
    const http: Tally = { answered: 0, lost: [], closeHeaders: 0 };
    const rpc: Tally = { answered: 0, lost: [], closeHeaders: 0 };
    try {
      const loops = [
        ...Array.from({ length: 6 }, () => httpLoop(server.httpUrl, http)),
        ...Array.from({ length: 2 }, () => grpcLoop(client, rpc)),
      ];
      // Steady load: every client has had answers before the signal.
      while (http.answered < 60 || rpc.answered < 20) await sleep(20);
      const answeredBefore = http.answered + rpc.answered;
      const segments = segmentsOf(pid).length;
      assert.ok(segments > 0, 'the python instance made its /dev/shm segments');
      const signalled = performance.now();
      server.child.kill('SIGTERM');
      const [code] = await exited;
      const drainMs = performance.now() - signalled;
      await Promise.all(loops);
      const logs = server.logs();
      assert.deepEqual([...http.lost, ...rpc.lost], [], 'every request sent got its whole answer');
      assert.equal(code, 0, logs.slice(-2000));
      // It exited because the drain finished, not because the exit timeout ran out.
      assert.match(logs, /stopped/);
      assert.doesNotMatch(logs, /exit timeout of \d+s reached/);
      assert.ok(http.closeHeaders > 0, 'responses during the drain carried Connection: close');
      assert.deepEqual(segmentsOf(pid), [], 'no /dev/shm segment of the server left');
      t.diagnostic(
        `drain: exit ${Math.round(drainMs)} ms after SIGTERM (exit timeout ${EXIT_TIMEOUT_SECS} s); ` +
          `${http.answered + rpc.answered - answeredBefore} requests answered during the drain, ` +
          `${http.closeHeaders} with Connection: close; ${segments} /dev/shm segments before, none after`,
      );
    } finally {
      client.close();
      if (server.exited() === undefined) server.child.kill('SIGKILL');
    }
  });
});
