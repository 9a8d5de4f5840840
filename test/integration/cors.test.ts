import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { serve } from '../../src/serve.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * `--http-cors-allow-origin` over a real socket, header by header (the browser's view is cors-browser.test.ts):
 * what a preflight is answered, what an allowed response carries, and that nothing changes without the flag.
 */

const APP = 'https://app.example.com';
const ANY = 'https://anyone.example.org';

describe('CORS allow-list', () => {
  let s: TestServer;
  let plain: TestServer;

  before(async () => {
    s = await startNereid({
      allowGrpc: false,
      allowMetrics: false,
      httpCorsAllowOrigin: [APP, 'model-repository=https://admin.example.com', 'health=*'],
      httpRestrictedApi: ['model-repository:Admin-Key=k'],
    });
    plain = await startNereid({ allowGrpc: false, allowMetrics: false });
  });
  after(async () => {
    await s?.close();
    await plain?.close();
  });

  const preflight = (url: string, origin: string, method = 'POST') =>
    fetch(url, {
      method: 'OPTIONS',
      headers: {
        Origin: origin,
        'Access-Control-Request-Method': method,
        'Access-Control-Request-Headers': 'content-type',
      },
    });

  it("answers an allowed origin's preflight with the route's methods and the headers the routes read", async () => {
    const r = await preflight(`${s.url}/v2/models/simple/infer`, APP);
    assert.equal(r.status, 204);
    assert.equal(r.headers.get('access-control-allow-origin'), APP);
    assert.equal(r.headers.get('access-control-allow-credentials'), 'true');
    assert.equal(r.headers.get('access-control-allow-methods'), 'POST');
    assert.match(r.headers.get('access-control-allow-headers') ?? '', /Inference-Header-Content-Length/);
    assert.match(r.headers.get('access-control-allow-headers') ?? '', /Content-Type/);
    assert.match(r.headers.get('vary') ?? '', /Origin/);
    const trace = await preflight(`${s.url}/v2/models/simple/trace/setting`, 'https://admin.example.com');
    assert.equal(trace.status, 405, 'trace is not in the admin origin list');
    const admin = await preflight(`${s.url}/v2/repository/models/simple/load`, 'https://admin.example.com');
    assert.equal(admin.status, 204);
    assert.match(admin.headers.get('access-control-allow-headers') ?? '', /Admin-Key/, 'its restricted header');
  });

  it('exposes Inference-Header-Content-Length on an allowed response, and echoes the origin, never *', async () => {
    const r = await fetch(`${s.url}/v2/models/simple`, { headers: { Origin: APP } });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('access-control-allow-origin'), APP);
    assert.equal(r.headers.get('access-control-expose-headers'), 'Inference-Header-Content-Length');
  });

  it('a * entry answers any origin with *, and never with credentials', async () => {
    const r = await fetch(`${s.url}/v2/health/ready`, { headers: { Origin: ANY } });
    assert.equal(r.headers.get('access-control-allow-origin'), '*');
    assert.equal(r.headers.get('access-control-allow-credentials'), null);
    const meta = await fetch(`${s.url}/v2/models/simple`, { headers: { Origin: ANY } });
    assert.equal(meta.headers.get('access-control-allow-origin'), null, 'metadata is not in the * entry');
  });

  it('BAD CALL - an allowed origin still meets the restricted APIs and, outside its list, the cross-site refusal', async () => {
    const noKey = await fetch(`${s.url}/v2/repository/models/simple/unload`, {
      method: 'POST',
      headers: { Origin: 'https://admin.example.com', 'Sec-Fetch-Site': 'cross-site' },
    });
    assert.equal(noKey.status, 403);
    assert.match(((await noKey.json()) as { error: string }).error, /expecting header 'Admin-Key'/);
    const notListed = await fetch(`${s.url}/v2/repository/models/simple/unload`, {
      method: 'POST',
      headers: { Origin: APP, 'Sec-Fetch-Site': 'cross-site', 'Admin-Key': 'k' },
    });
    assert.equal(notListed.status, 403);
    assert.match(((await notListed.json()) as { error: string }).error, /cross-site request refused/);
    assert.equal(s.server.modelReady('simple'), true);
  });

  it('without the flag: no CORS headers, OPTIONS is 405 as before', async () => {
    const r = await preflight(`${plain.url}/v2/models/simple/infer`, APP);
    assert.equal(r.status, 405);
    assert.equal(r.headers.get('access-control-allow-origin'), null);
    const get = await fetch(`${plain.url}/v2/models/simple`, { headers: { Origin: APP } });
    assert.equal(get.headers.get('access-control-allow-origin'), null);
  });

  it('BAD CALL - a malformed origin or an unknown API fails start-up naming the flag', async () => {
    for (const [entry, message] of [
      ['https://app.example.com/', /is not an origin/],
      ['app.example.com', /is not an origin/],
      ['null', /is not an origin/],
      ['inferense=https://app.example.com', /unknown API 'inferense' in --http-cors-allow-origin/],
    ] as const) {
      await assert.rejects(
        serve({ repositories: [], httpPort: 0, allowGrpc: false, allowMetrics: false, httpCorsAllowOrigin: [entry] }),
        message,
        entry,
      );
    }
  });
});
