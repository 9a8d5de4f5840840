/**
 * The package entry point as an embedder sees it: `import … from 'nereid'` resolves through Node's package
 * self-reference and package.json `exports["."]`. `npm test` runs with `--conditions=nereid-source`, which points
 * that entry at src/index.ts (run under tsx); without the condition it is dist/index.js, the published build. The
 * last test checks the two stay the same module, so the source test also vouches for what is published.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { InvalidArgError, NEREID_VERSION, NereidError, serve } from 'nereid';
import { EXAMPLES } from '../helpers/server.js';

const execFileAsync = promisify(execFile);
const PACKAGE = new URL('../../package.json', import.meta.url);

interface EntryPoint {
  'nereid-source': string;
  types: string;
  default: string;
}

describe('nereid (embedding)', () => {
  it('serves the example repository on a free port and answers an inference on simple', async () => {
    const nereid = await serve({
      repositories: [EXAMPLES],
      httpAddress: '127.0.0.1',
      httpPort: 0,
      allowGrpc: false,
      allowMetrics: false,
      // fetch pools the connection: close it at shutdown instead of keeping it 5 s for a next request.
      httpDrainIdleMs: 0,
    });
    try {
      assert.equal(nereid.httpAddress, '127.0.0.1');
      assert.ok(nereid.httpPort !== undefined && nereid.httpPort > 0);
      assert.equal(nereid.httpUrl, `http://127.0.0.1:${nereid.httpPort}`);
      assert.equal(nereid.grpcPort, undefined);
      assert.equal(nereid.metricsPort, undefined);
      const res = await fetch(`${nereid.httpUrl}/v2/models/simple/infer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          inputs: [
            { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: [...Array(16).keys()] },
            { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array(16).fill(1) },
          ],
        }),
      });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { outputs: { name: string; data: number[] }[] };
      const sum = body.outputs.find((o) => o.name === 'OUTPUT0');
      assert.deepEqual(
        sum?.data,
        Array.from({ length: 16 }, (_, i) => i + 1),
      );
    } finally {
      await nereid.close();
    }
    // Closed means closed: the port refuses, and a second close() is the same settled promise.
    await assert.rejects(fetch(`${nereid.httpUrl}/v2/health/live`));
    await nereid.close();
  });

  it('starts gRPC and metrics on free ports when asked and reports where they are bound', async () => {
    const nereid = await serve({
      repositories: [EXAMPLES],
      httpAddress: '127.0.0.1',
      httpPort: 0,
      grpcAddress: '127.0.0.1',
      grpcPort: 0,
      metricsPort: 0,
      httpDrainIdleMs: 0,
    });
    try {
      assert.equal(nereid.grpcAddress, '127.0.0.1');
      assert.ok(nereid.grpcPort !== undefined && nereid.grpcPort > 0);
      assert.equal(nereid.metricsAddress, '127.0.0.1');
      const metrics = await fetch(`http://127.0.0.1:${nereid.metricsPort}/metrics`);
      assert.equal(metrics.status, 200);
      assert.match(await metrics.text(), /nv_inference_request_success/);
    } finally {
      await nereid.close();
    }
  });

  it('BAD CALL - rejects with a NereidError when a model repository is missing', async () => {
    await assert.rejects(
      serve({ repositories: ['/nonexistent/nereid-repo'], httpPort: 0, allowGrpc: false, allowMetrics: false }),
      (err: unknown) => err instanceof NereidError,
    );
  });

  it('BAD CALL - rejects an out-of-range port with InvalidArgError', async () => {
    await assert.rejects(
      serve({ repositories: [EXAMPLES], httpPort: 70000, allowGrpc: false, allowMetrics: false }),
      InvalidArgError,
    );
  });

  it('reports the version of package.json in the export and in server metadata', async () => {
    const pkg = JSON.parse(readFileSync(PACKAGE, 'utf8')) as { version: string };
    assert.equal(NEREID_VERSION, pkg.version);
    const nereid = await serve({
      repositories: [EXAMPLES],
      httpAddress: '127.0.0.1',
      httpPort: 0,
      allowGrpc: false,
      allowMetrics: false,
      modelControlMode: 'explicit',
      httpDrainIdleMs: 0,
    });
    try {
      const meta = (await (await fetch(`${nereid.httpUrl}/v2`)).json()) as { version: string };
      assert.equal(meta.version, pkg.version);
    } finally {
      await nereid.close();
    }
  });
});

describe('nereid (the published package)', () => {
  it('maps every entry point to a source file the build emits to the published path', () => {
    const pkg = JSON.parse(readFileSync(PACKAGE, 'utf8')) as { exports: Record<string, EntryPoint> };
    for (const [subpath, entry] of Object.entries(pkg.exports)) {
      // tsconfig.build.json: rootDir src, outDir dist, declarations on.
      const stem = entry['nereid-source'].replace(/^\.\/src\//, '').replace(/\.ts$/, '');
      assert.equal(entry.default, `./dist/${stem}.js`, subpath);
      assert.equal(entry.types, `./dist/${stem}.d.ts`, subpath);
      assert.ok(readFileSync(new URL(`../../${entry['nereid-source']}`, import.meta.url)).length > 0, subpath);
    }
  });

  it('builds no test code or test data into dist/', async () => {
    // The file list of the build program (what `npm run build` would emit), without emitting: ~1 s.
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    const { stdout } = await execFileAsync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--listFilesOnly'], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
    });
    const sources = stdout.split('\n').filter((f) => /\/src\/.*\.ts$/.test(f) && !f.includes('/node_modules/'));
    assert.ok(
      sources.some((f) => f.endsWith('/src/index.ts')),
      'the build program includes src/index.ts',
    );
    assert.deepEqual(
      sources.filter((f) => /\.test(-[\w-]+)?\.ts$/.test(f)),
      [],
    );
  });
});
