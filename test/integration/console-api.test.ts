import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LogRing } from '../../src/console/index.js';
import { createLogger } from '../../src/core/logger.js';
import { startNereid, type TestServer } from '../helpers/server.js';

const SIMPLE_BODY = JSON.stringify({
  inputs: [
    { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array.from({ length: 16 }, (_, i) => i) },
    { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array.from({ length: 16 }, () => 1) },
  ],
});

describe('web console endpoints', () => {
  let nereid: TestServer;
  const ring = new LogRing(50);
  before(async () => {
    nereid = await startNereid({
      allowGrpc: false,
      allowMetrics: false,
      modelControlMode: 'explicit',
      loadModels: ['simple', 'classifier'],
      consoleLogs: ring,
      logger: createLogger({ write: (l) => ring.push(l) }),
      consoleAccess: (req, category) =>
        category === 'logging' && req.headers['admin-key'] !== 'secret'
          ? "This API is restricted, expecting header 'admin-key'"
          : undefined,
    });
  });
  after(() => nereid.close());

  it('redirects /console to /console/ and serves the page with a strict content policy', async () => {
    const redirect = await fetch(`${nereid.url}/console`, { redirect: 'manual' });
    assert.equal(redirect.status, 301);
    assert.equal(redirect.headers.get('location'), '/console/');
    const page = await fetch(`${nereid.url}/console/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self';.*frame-ancestors 'none'/);
    assert.equal(page.headers.get('x-frame-options'), 'DENY');
    assert.match(await page.text(), /<script src="app\.js"><\/script>/);
    const js = await fetch(`${nereid.url}/console/app.js`);
    assert.match(js.headers.get('content-type') ?? '', /^text\/javascript/);
  });

  it('BAD CALL - serves only its own files: no path leaves the folder', async () => {
    for (const path of [
      '/console/../package.json',
      '/console/%2e%2e/package.json',
      '/console/nope.js',
      '/console/a/b.js',
    ]) {
      const res = await fetch(`${nereid.url}${path}`);
      assert.equal(res.status, 404, path);
    }
  });

  it('says the model control mode and how many log lines it keeps', async () => {
    const body = (await (await fetch(`${nereid.url}/console/api/server`)).json()) as Record<string, unknown>;
    assert.equal(body.model_control_mode, 'explicit');
    assert.equal(body.logs_kept, 50);
  });

  it("prints a loaded model's completed config as config.pbtxt text", async () => {
    const res = await fetch(`${nereid.url}/console/api/models/classifier/config.pbtxt`);
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.match(text, /^name: "classifier"$/m);
    assert.match(text, /^max_batch_size: 8$/m);
    assert.match(text, /label_filename: "labels\.txt"/);
    assert.match(text, /^\s+data_type: TYPE_FP32$/m);
  });

  it('BAD CALL - an unknown model or a malformed version is answered with the API error', async () => {
    const unknown = await fetch(`${nereid.url}/console/api/models/nope/config.pbtxt`);
    assert.equal(unknown.status, 404);
    assert.match(((await unknown.json()) as { error: string }).error, /nope/);
    const bad = await fetch(`${nereid.url}/console/api/models/simple/config.pbtxt?version=x`);
    assert.equal(bad.status, 400);
    const other = await fetch(`${nereid.url}/console/api/other`);
    assert.equal(other.status, 404);
  });

  it('keeps recent log lines behind the restricted-API check and returns only newer ones on request', async () => {
    const refused = await fetch(`${nereid.url}/console/api/logs`);
    assert.equal(refused.status, 403);
    assert.match(((await refused.json()) as { error: string }).error, /admin-key/);
    const headers = { 'admin-key': 'secret' };
    const all = (await (await fetch(`${nereid.url}/console/api/logs`, { headers })).json()) as {
      next: number;
      lines: { msg: string }[];
    };
    assert.ok(
      all.lines.some((l) => l.msg === "loaded model 'simple'"),
      JSON.stringify(all.lines),
    );
    const none = (await (await fetch(`${nereid.url}/console/api/logs?after=${all.next}`, { headers })).json()) as {
      lines: unknown[];
    };
    assert.deepEqual(none.lines, []);
    const bad = await fetch(`${nereid.url}/console/api/logs?after=-1`, { headers });
    assert.equal(bad.status, 400);
  });

  it('gives latency percentiles of the requests of the last window', async () => {
    for (let i = 0; i < 5; i++) {
      const r = await fetch(`${nereid.url}/v2/models/simple/infer`, { method: 'POST', body: SIMPLE_BODY });
      assert.equal(r.status, 200);
    }
    const body = (await (await fetch(`${nereid.url}/console/api/latency?window_ms=60000`)).json()) as {
      models: { model: string; count: number; p50_us: number; p99_us: number }[];
    };
    const simple = body.models.find((m) => m.model === 'simple');
    assert.ok(simple && simple.count === 5, JSON.stringify(body));
    assert.ok(simple.p50_us > 0 && simple.p99_us >= simple.p50_us);
    const bad = await fetch(`${nereid.url}/console/api/latency?window_ms=5`);
    assert.equal(bad.status, 400);
  });

  it('BAD CALL - refuses a state-changing request that a browser says is cross-site, with 403', async () => {
    const unload = `${nereid.url}/v2/repository/models/simple/unload`;
    const cases: Record<string, string>[] = [
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
      { origin: 'http://evil.example' },
      { origin: 'null' },
    ];
    for (const headers of cases) {
      const res = await fetch(unload, { method: 'POST', headers, body: '{}' });
      assert.equal(res.status, 403, JSON.stringify(headers));
      assert.match(((await res.json()) as { error: string }).error, /cross-site request refused/);
    }
    assert.equal((await fetch(`${nereid.url}/v2/models/simple/ready`)).status, 200, 'simple is still loaded');
    // Reading stays open: a cross-site GET gets its answer (the browser keeps it from the other site's script).
    const read = await fetch(`${nereid.url}/v2/models/simple`, { headers: { 'sec-fetch-site': 'cross-site' } });
    assert.equal(read.status, 200);
  });

  it('lets same-origin browser calls and non-browser clients change state', async () => {
    const host = new URL(nereid.url).host;
    const infer = `${nereid.url}/v2/models/simple/infer`;
    const cases: Record<string, string>[] = [{}, { 'sec-fetch-site': 'same-origin' }, { origin: `http://${host}` }];
    for (const headers of cases) {
      const res = await fetch(infer, { method: 'POST', headers, body: SIMPLE_BODY });
      assert.equal(res.status, 200, JSON.stringify(headers));
    }
  });
});

describe('web console turned off', () => {
  it('is not served with console: false (--console=false)', async () => {
    const nereid = await startNereid({ allowGrpc: false, allowMetrics: false, console: false });
    try {
      assert.equal((await fetch(`${nereid.url}/console/`)).status, 404);
      assert.equal((await fetch(`${nereid.url}/console/api/server`)).status, 404);
    } finally {
      await nereid.close();
    }
  });
});
