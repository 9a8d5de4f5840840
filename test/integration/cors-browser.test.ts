import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import * as nodeModule from 'node:module';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * CORS (`--http-cors-allow-origin`) in a real headless Chromium: Nereid's own TypeScript client, loaded from its
 * sources as ES modules by a page of another site, calls the server, and what the browser lets through is what the
 * operator's list says. The sites are names Chromium maps to 127.0.0.1 (`app.test`, `evil.test`, `nereid.test`),
 * so every call is cross-site as it is in production.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const skip = !existsSync(CHROMIUM) && process.env.CI !== 'true' ? `no Chromium at ${CHROMIUM}` : false;
const SRC = fileURLToPath(new URL('../../src/', import.meta.url));
const KEY = 'secret-value';
/** Node 24's TypeScript type stripper (newer than the @types/node this project builds against). */
const { stripTypeScriptTypes } = nodeModule as unknown as {
  stripTypeScriptTypes(code: string, opts: { mode: 'transform' }): string;
};

/** A site serving one page and Nereid's sources (`/src/x.js` ← `src/x.ts` with its types stripped). */
async function site(): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    if (path.startsWith('/src/') && path.endsWith('.js') && !path.includes('..')) {
      readFile(`${SRC}${path.slice(5, -3)}.ts`, 'utf8')
        .then((ts) => {
          res.setHeader('Content-Type', 'text/javascript');
          res.end(stripTypeScriptTypes(ts, { mode: 'transform' }));
        })
        .catch(() => res.writeHead(404).end());
      return;
    }
    res.setHeader('Content-Type', 'text/html');
    res.end('<!doctype html><title>app</title>');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

describe('CORS in Chromium', { skip }, () => {
  let nereid: TestServer;
  let browser: Browser;
  let app: { server: Server; port: number };
  let evil: { server: Server; port: number };
  let target: string;

  before(async () => {
    app = await site();
    evil = await site();
    nereid = await startNereid({
      allowGrpc: false,
      allowMetrics: false,
      modelControlMode: 'explicit',
      loadModels: ['simple'],
      httpCorsAllowOrigin: [`http://app.test:${app.port}`],
      httpRestrictedApi: [`inference:X-Api-Key=${KEY}`],
    });
    target = `http://nereid.test:${new URL(nereid.url).port}`;
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-dev-shm-usage',
        '--disable-gpu',
        '--host-resolver-rules=MAP app.test 127.0.0.1, MAP evil.test 127.0.0.1, MAP nereid.test 127.0.0.1',
      ],
    });
  });

  after(async () => {
    await browser?.close();
    await nereid?.close();
    app?.server.close();
    evil?.server.close();
  });

  /**
   * Runs the client in a page of `origin`: `body` is page code with `client` (a NereidHttpClient of Nereid) and
   * `input` (simple's two inputs) in scope; it returns what the code returns, or `{ thrown }`.
   */
  async function inPage(origin: string, body: string, headers: Record<string, string> = {}): Promise<unknown> {
    const page: Page = await browser.newPage();
    try {
      await page.goto(`${origin}/`);
      return await page.evaluate(`(async () => {
        const { NereidHttpClient } = await import('/src/client/index.js');
        const client = new NereidHttpClient({ url: ${JSON.stringify(target)}, headers: ${JSON.stringify(headers)} });
        const data = Int32Array.from({ length: 16 }, (_, i) => i);
        const input = [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Int32Array.from(data, () => 1) },
        ];
        try {
          ${body}
        } catch (e) {
          return { thrown: String(e && e.message) };
        }
      })()`);
    } finally {
      await page.close();
    }
  }

  it('an allowed origin runs the client: metadata, and binary inference reading Inference-Header-Content-Length', async () => {
    const r = (await inPage(
      `http://app.test:${app.port}`,
      `const meta = await client.modelMetadata('simple');
       const result = await client.infer('simple', input);
       return { name: meta.name, sum: Array.from(result.output('OUTPUT0').data) };`,
      { 'X-Api-Key': KEY },
    )) as { name: string; sum: number[] };
    assert.equal(r.name, 'simple', JSON.stringify(r));
    assert.deepEqual(
      r.sum,
      Array.from({ length: 16 }, (_, i) => i + 1),
    );
  });

  it('BAD CALL - restricted APIs still apply: without the header the page reads the 403 and its message', async () => {
    const r = (await inPage(`http://app.test:${app.port}`, `await client.infer('simple', input); return {};`)) as {
      thrown?: string;
    };
    assert.match(r.thrown ?? '', /This API is restricted, expecting header 'X-Api-Key'/);
  });

  it('BAD CALL - an allowed origin gets nothing more: unloading a model (not in its list) is blocked', async () => {
    const r = (await inPage(`http://app.test:${app.port}`, `await client.unloadModel('simple'); return {};`)) as {
      thrown?: string;
    };
    assert.match(r.thrown ?? '', /fetch|network/i, 'the browser blocked it');
    assert.equal(nereid.server.modelReady('simple'), true, 'simple is still loaded');
  });

  it('BAD CALL - an origin not on the list can neither read nor change anything', async () => {
    const r = (await inPage(
      `http://evil.test:${evil.port}`,
      `const ready = await client.isServerReady().catch((e) => 'blocked: ' + e.message);
       await fetch(${JSON.stringify(`${target}/v2/repository/models/simple/unload`)}, { method: 'POST', mode: 'no-cors', body: '{}' });
       return { ready };`,
    )) as { ready: unknown };
    assert.match(String(r.ready), /^blocked: /);
    assert.equal(nereid.server.modelReady('simple'), true, 'the no-cors POST was refused as cross-site');
  });
});
