import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { EXAMPLES } from '../helpers/server.js';
import { startServerProcess } from '../hardening/server-process.js';

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

function nereid(args: string[]): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
}

async function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = nereid(args);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d));
  child.stderr?.on('data', (d: Buffer) => (stderr += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

describe('nereid CLI', () => {
  it('prints help listing Triton flag names', async () => {
    const r = await run(['serve', '--help']);
    assert.equal(r.code, 0);
    for (const f of [
      '--model-repository',
      '--http-port',
      '--backend-config',
      '--strict-model-config',
      '--exit-on-error',
      '--log-verbose',
    ]) {
      assert.ok(r.stdout.includes(f), f);
    }
    // The first lines say what it serves: all four backends, not "ONNX models".
    const head = r.stdout.split('\nOptions:')[0];
    for (const b of ['onnxruntime', 'tensorrt', 'pytorch', 'python']) assert.match(head, new RegExp(`\\(${b}\\)`), b);
  });

  it('BAD CALL - an unknown flag exits 2 with a suggestion', async () => {
    const r = await run(['serve', '--model-repository', EXAMPLES, '--http-prot=1']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown option '--http-prot'; did you mean '--http-port'\?/);
  });

  it('BAD CALL - a missing repository folder fails start-up with the path', async () => {
    const r = await run([
      'serve',
      '--model-repository',
      '/nonexistent/repo',
      '--http-port=0',
      '--metrics-port=0',
      '--grpc-port=0',
    ]);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /\/nonexistent\/repo/);
  });

  it('serves the examples with client shared memory on, and exits 0 on SIGTERM', async () => {
    const { child, httpUrl } = await startServerProcess(['--model-repository', EXAMPLES, '--allow-client-shm=true']);
    try {
      const res = await fetch(`${httpUrl}/v2/health/ready`);
      assert.equal(res.status, 200);
      // Registration is allowed (the key does not exist, so it is refused for that reason, not as disabled).
      const reg = await fetch(`${httpUrl}/v2/systemsharedmemory/region/r/register`, {
        method: 'POST',
        body: JSON.stringify({ key: '/nereid-cli-test-missing', byte_size: 8 }),
      });
      assert.equal(reg.status, 500);
      assert.match(await reg.text(), /Unable to open shared memory region/);
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0);
  });
});

describe('graceful shutdown', () => {
  /**
   * A text_encoder request big enough to take a while on this machine, over node:http: it reports a truncated body
   * as such (undici's fetch trips an internal assertion when the server closes an idle keep-alive connection at
   * shutdown, which is the server's right). Resolves with the status, or 0 when the body was cut short.
   */
  function slowRequest(port: string): Promise<number> {
    const batch = 8;
    const seq = 512;
    const ids = Array.from({ length: batch * seq }, (_, i) => i % 1000);
    const ones = ids.map(() => 1);
    const zeros = ids.map(() => 0);
    const input = (name: string, data: number[]): unknown => ({ name, shape: [batch, seq], datatype: 'INT32', data });
    const body = JSON.stringify({
      inputs: [input('input_ids', ids), input('attention_mask', ones), input('token_type_ids', zeros)],
      outputs: [{ name: 'output', parameters: { binary_data: true } }],
    });
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          path: '/v2/models/text_encoder/infer',
          method: 'POST',
          headers: { 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let got = 0;
          res.on('data', (c: Buffer) => (got += c.length));
          res.on('end', () => resolve(got === Number(res.headers['content-length']) ? (res.statusCode ?? 0) : 0));
          res.on('aborted', () => resolve(0));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  it('SIGTERM with requests in flight: every one is answered 200, then the process exits 0', async () => {
    const { child, httpUrl } = await startServerProcess(['--model-repository', EXAMPLES]);
    const inflight = Array.from({ length: 6 }, () => slowRequest(new URL(httpUrl).port));
    await new Promise((r) => setTimeout(r, 300));
    child.kill('SIGTERM');
    const exited = once(child, 'exit');
    // None is lost: those already running finish (200); one the server reads after the signal is refused (503).
    const statuses = await Promise.all(inflight);
    assert.ok(
      statuses.every((s) => s === 200 || s === 503),
      `every request answered: ${statuses}`,
    );
    assert.ok(statuses.includes(200), 'requests in flight at SIGTERM completed');
    const [code] = (await exited) as [number | null];
    assert.equal(code, 0);
  });
});
