import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { EXAMPLES } from '../helpers/server.js';
import { startServerProcess } from '../hardening/server-process.js';

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

/** The environment without FORCE_COLOR (a CI may set it): piped output then has no colors. */
function withoutColorForcing(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.FORCE_COLOR;
  return env;
}

/**
 * Runs `nereid serve` with stderr piped (not a terminal) until its ready line, then SIGTERM; returns what it wrote.
 * `ready` recognizes the ready line in the chosen format.
 */
async function serveUntilReady(args: string[], ready: RegExp, env: NodeJS.ProcessEnv = {}): Promise<string> {
  const server = await startServerProcess(['--model-repository', EXAMPLES, ...args], [], {
    env: { ...withoutColorForcing(), ...env },
    // The endpoints block lists the metrics endpoint too.
    metrics: true,
    ready,
  });
  await server.stop();
  return server.logs();
}

describe('nereid serve output', () => {
  it('writes JSON lines when stderr is not a terminal, with no duplicated key and the model table in the ready record', async () => {
    const out = await serveUntilReady([], /"msg":"nereid [^"]+ ready"/);
    const lines = out.split('\n').filter((l) => l.startsWith('{'));
    assert.ok(lines.length > 5, out);
    for (const line of lines) {
      // JSON.parse keeps the last of two equal keys, so count them in the text (the ready record's model rows
      // repeat their keys by design).
      if (line.includes('"models":')) continue;
      const keys = [...line.matchAll(/"([A-Za-z_]+)":/g)].map((m) => m[1]);
      assert.equal(new Set(keys).size, keys.length, `a key written twice: ${line}`);
    }
    const ready = JSON.parse(lines.find((l) => l.includes(' ready"')) as string) as {
      models: { name: string; version: string; state: string; reason: string }[];
      endpoints: Record<string, string>;
    };
    assert.deepEqual(
      ready.models.map((m) => [m.name, m.version, m.state]),
      [
        ['classifier', '1', 'READY'],
        ['simple', '1', 'READY'],
        ['text_encoder', '1', 'READY'],
      ],
    );
    assert.match(ready.endpoints.http, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.match(ready.endpoints.grpc, /^127\.0\.0\.1:\d+$/);
    assert.match(ready.endpoints.console, /^http:\/\/127\.0\.0\.1:\d+\/console\/$/);
    const begins = lines.filter((l) => l.includes('"load":"begin"'));
    assert.equal(begins.length, 3, 'a begin record per model load');
  });

  it("prints formatted lines, Triton's model table and the endpoints with --log-format=pretty", async () => {
    const out = await serveUntilReady(['--log-format=pretty', '--console=false'], /Endpoints\n(?: {2}\S.*\n){3}/);
    assert.ok(!out.split('\n').some((l) => l.startsWith('{')), `no JSON line:\n${out}`);
    assert.match(
      out,
      /^\d\d:\d\d:\d\d\.\d{3} INFO {2}loaded model 'simple' {2}model=simple versions=\[1\] seconds=[\d.]+$/m,
    );
    assert.match(out, /^\| Model +\| Version \| Status \| Reason \|$/m);
    assert.match(out, /^\| text_encoder \| 1 +\| READY +\| +\|$/m);
    assert.match(out, /^ {2}HTTP +http:\/\/127\.0\.0\.1:\d+$/m);
    assert.ok(!/Console/.test(out), '--console=false leaves the console out of the endpoints');
  });

  describe('with a model that fails to load (--exit-on-error=false)', () => {
    // A second repository holding one model whose config does not parse: the examples load, it fails.
    const broken = mkdtempSync(join(tmpdir(), 'nereid-unready-'));
    mkdirSync(join(broken, 'bad', '1'), { recursive: true });
    writeFileSync(join(broken, 'bad', 'config.pbtxt'), 'max_batch_size: "eight"\n');
    after(() => rmSync(broken, { recursive: true, force: true }));
    const args = ['--model-repository', broken, '--exit-on-error=false'];
    const startLine = /"msg":"nereid [^"]+(ready|not READY[^"]*)"/;

    it('BAD CALL - does not say "ready" while readiness is false, and names the model keeping it unready', async () => {
      const out = await serveUntilReady(args, startLine);
      const line = startLine.exec(out)?.[0] ?? '';
      assert.doesNotMatch(line, / ready"$/, line);
      assert.match(
        line,
        /started but not ready: model 'bad' is not READY \(strict readiness; --strict-readiness=false/,
      );
      assert.match(out.split('\n').find((l) => l.includes('not ready:')) ?? '', /"level":40/);
    });

    it('says "ready" with --strict-readiness=false, where the server is ready without it', async () => {
      const out = await serveUntilReady([...args, '--strict-readiness=false'], startLine);
      assert.match(startLine.exec(out)?.[0] ?? '', /"msg":"nereid [^"]+ ready"$/);
    });
  });

  it('BAD CALL - an unknown --log-format exits 2 naming the choices', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', MAIN, 'serve', '--model-repository', EXAMPLES, '--log-format=xml'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d));
    const [code] = (await once(child, 'exit')) as [number];
    assert.equal(code, 2);
    assert.match(err, /--log-format must be one of default, ISO8601, json, pretty; got 'xml'/);
  });
});
