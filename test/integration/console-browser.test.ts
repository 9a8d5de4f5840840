import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { LogRing } from '../../src/console/index.js';
import { createLogger } from '../../src/core/logger.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

/**
 * The web console in a real headless Chromium (Debian's `chromium`, driven by puppeteer-core): every page, its
 * actions against a real server, and the cross-site refusal as a browser sends it. Screenshots of each page go to
 * $NEREID_SCREENSHOTS when set (`NEREID_SCREENSHOTS=docs/console` refreshes the ones in the docs).
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = process.env.NEREID_SCREENSHOTS;
// Without Chromium a developer's run skips; CI installs it (.ci/run), so there a missing browser fails.
const skip = !existsSync(CHROMIUM) && process.env.CI !== 'true' ? `no Chromium at ${CHROMIUM}` : false;

const TIMEOUT = 20_000;

/**
 * Pixels of a series color on each chart: the color the legend gives model 'simple' on requests/s, #2f9e44 (p50)
 * on latency, #1f6feb on the batch bars. Page code as a string: the test's own functions would carry the TypeScript
 * loader's helpers into the page.
 */
const COUNT_COLORED_PIXELS = `(() => {
  function count(id, rgb) {
    const c = document.getElementById(id);
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
      if (Math.abs(d[i] - rgb[0]) < 8 && Math.abs(d[i + 1] - rgb[1]) < 8 && Math.abs(d[i + 2] - rgb[2]) < 8) n++;
    }
    return n;
  }
  const swatch = [...document.querySelectorAll('#chart-rps-legend span')].find((s) => s.textContent === 'simple');
  const simple = swatch ? getComputedStyle(swatch.querySelector('i')).backgroundColor.match(/\\d+/g).map(Number) : [-99, -99, -99];
  return {
    rps: count('chart-rps', simple),
    p50: count('chart-latency', [0x2f, 0x9e, 0x44]),
    batches: count('chart-batch', [0x1f, 0x6f, 0xeb]),
  };
})()`;

describe('web console in Chromium', { skip }, () => {
  let nereid: TestServer;
  let browser: Browser;
  let page: Page;
  /** Script errors and content-policy violations: any is a failure. */
  const problems: string[] = [];

  before(async () => {
    const ring = new LogRing();
    nereid = await startNereid({
      allowGrpc: false,
      allowMetrics: false,
      modelControlMode: 'explicit',
      loadModels: ['simple', 'text_encoder'],
      consoleLogs: ring,
      logger: createLogger({ write: (l) => ring.push(l) }),
    });
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      // Root in CI cannot use Chromium's sandbox; /dev/shm is small in containers.
      args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 860 });
    page.on('pageerror', (e) => problems.push(`page error: ${(e as Error).message}`));
    page.on('console', (m) => {
      if (/Content Security Policy|Uncaught/.test(m.text())) problems.push(`console: ${m.text()}`);
    });
    if (SHOTS) await mkdir(SHOTS, { recursive: true });
  });

  after(async () => {
    await browser?.close();
    await nereid?.close();
    assert.deepEqual(problems, []);
  });

  /** A fresh load of a console page (a goto that only changes the hash would keep the old page). */
  async function open(hash: string): Promise<void> {
    await page.goto('about:blank');
    await page.goto(`${nereid.url}/console/${hash}`, { waitUntil: 'domcontentloaded' });
  }

  async function shot(name: string): Promise<void> {
    if (SHOTS) await page.screenshot({ path: resolve(SHOTS, `${name}.png`), fullPage: true });
  }

  function rowState(model: string): Promise<string> {
    return page.$eval(`tr[data-model="${model}"] td:nth-child(3)`, (td) => td.textContent ?? '');
  }

  it('lists the models with their state, and loads one with its button (explicit mode)', async () => {
    await open('#/models');
    await page.waitForSelector('tr[data-model="classifier"]', { timeout: TIMEOUT });
    assert.equal(await rowState('simple'), 'READY');
    assert.equal(await rowState('classifier'), 'UNLOADED');
    const load = await page.waitForSelector('tr[data-model="classifier"] button', { timeout: TIMEOUT });
    assert.equal(await load?.evaluate((b) => b.textContent), 'Load');
    await load?.click();
    await page.waitForFunction(
      `document.querySelector('tr[data-model="classifier"] td:nth-child(3)')?.textContent === 'READY'`,
      { timeout: TIMEOUT },
    );
    assert.equal(nereid.server.modelReady('classifier'), true, 'the server loaded it');
    await shot('models');
  });

  it("shows a model's versions, inputs and outputs, and its auto-completed config.pbtxt", async () => {
    await open('#/models/text_encoder');
    const pre = await page.waitForSelector('#config-text', { timeout: TIMEOUT });
    const text = (await pre?.evaluate((e) => e.textContent)) ?? '';
    // text_encoder's config.pbtxt on disk is partial: the inputs come from the ONNX file.
    assert.match(text, /name: "input_ids"/);
    assert.match(text, /data_type: TYPE_INT32/);
    assert.match(text, /^max_batch_size: \d+$/m);
    const inputs = await page.$$eval('#metadata table', (t) => t[0].textContent ?? '');
    assert.match(inputs, /attention_mask/);
    await shot('model');
  });

  it('shows the report nereid tune --write left in a model folder, read-only', async () => {
    const repo = await mkdtemp(join(tmpdir(), 'nereid-console-tune-'));
    await cp(join(EXAMPLES, 'simple'), join(repo, 'simple'), { recursive: true });
    const point = { concurrency: 4, throughput: 2376.3, p50Ms: 0.81, p99Ms: 8.31 };
    const report = {
      model: 'simple',
      mode: 'quick',
      objective: 'throughput',
      startedAt: '2026-12-02T03:00:00.000Z',
      machine: { host: 'vm', cores: 2 },
      candidates: [
        { label: 'default', points: [{ ...point, throughput: 800 }], best: { ...point, throughput: 800 } },
        { label: 'instances=2×CPU', points: [point], best: point },
        { label: 'instances=4×CPU', points: [], refused: 'answers differ from the default config' },
      ],
      unexplored: ['intra_op_thread_count=1'],
      written: { label: 'instances=2×CPU', reason: 'best in the search' },
    };
    await mkdir(join(repo, 'simple', 'tune'));
    await writeFile(join(repo, 'simple', 'tune', 'report.json'), JSON.stringify(report));
    const tuned = await startNereid({ repositories: [repo], allowGrpc: false, allowMetrics: false });
    try {
      await page.goto('about:blank');
      await page.goto(`${tuned.url}/console/#/models/simple`, { waitUntil: 'domcontentloaded' });
      const panel = await page.waitForSelector('#tune-report', { timeout: TIMEOUT });
      const text = (await panel?.evaluate((e) => e.textContent)) ?? '';
      assert.match(text, /Written: instances=2×CPU — best in the search/);
      assert.match(text, /2376\.3/);
      assert.match(text, /refused: answers differ/);
      assert.match(text, /Not explored \(time budget\): intra_op_thread_count=1/);
      assert.equal(await page.$$eval('#tune-report button', (b) => b.length), 0, 'read-only: no actions');
      await shot('tune');
    } finally {
      await tuned.close();
      await rm(repo, { recursive: true, force: true });
    }
  });

  it('shows no tune panel for a model without a report', async () => {
    await open('#/models/text_encoder');
    await page.waitForSelector('#config-text', { timeout: TIMEOUT });
    assert.equal(await page.$('#tune-report'), null);
  });

  it('runs inference from the try-it form and shows the top classes with their labels', async () => {
    await open('#/infer/classifier');
    const k = await page.waitForSelector('input[data-class-count="PROBS"]', { timeout: TIMEOUT });
    await k?.click({ count: 3 });
    await k?.type('3');
    await page.click('#infer-run');
    await page.waitForSelector('table.classes tbody tr', { timeout: TIMEOUT });
    const rows = await page.$$eval('table.classes tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')),
    );
    assert.equal(rows.length, 3);
    const labels = ['cat', 'dog', 'bird', 'fish', 'horse'];
    for (const [score, index, label] of rows) {
      assert.ok(Number.isFinite(Number(score)), score);
      assert.equal(label, labels[Number(index)], `label of class ${index}`);
    }
    await shot('try-it');
  });

  it('takes an input from an uploaded file (raw little-endian values)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-console-'));
    const a = join(dir, 'a.bin');
    const b = join(dir, 'b.bin');
    await writeFile(a, new Uint8Array(Int32Array.from({ length: 16 }, (_, i) => i * 10).buffer));
    await writeFile(b, new Uint8Array(Int32Array.from({ length: 16 }, () => 7).buffer));
    await open('#/infer/simple');
    const fa = await page.waitForSelector('input[data-file="INPUT0"]', { timeout: TIMEOUT });
    await fa?.uploadFile(a);
    await (await page.$('input[data-file="INPUT1"]'))?.uploadFile(b);
    await page.click('#infer-run');
    await page.waitForSelector('[data-output-name="OUTPUT0"] pre', { timeout: TIMEOUT });
    const sum = await page.$eval('[data-output-name="OUTPUT0"] pre', (p) => p.textContent ?? '');
    assert.deepEqual(
      JSON.parse(sum),
      Array.from({ length: 16 }, (_, i) => i * 10 + 7),
    );
  });

  it("BAD CALL - shows the server's message for a wrong input", async () => {
    await open('#/infer/simple');
    const area = await page.waitForSelector('textarea[data-input="INPUT0"]', { timeout: TIMEOUT });
    await area?.evaluate((t) => ((t as unknown as { value: string }).value = '[1, 2]'));
    await page.click('#infer-run');
    const err = await page.waitForSelector('#infer-result .error', { timeout: TIMEOUT });
    assert.match((await err?.evaluate((e) => e.textContent)) ?? '', /INPUT0/);
  });

  it('draws live charts of requests/s, latency, queue time and batch sizes while requests run', async () => {
    await open('#/live');
    await page.waitForSelector('#chart-rps', { timeout: TIMEOUT });
    const body = JSON.stringify({
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array.from({ length: 16 }, (_, i) => i) },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array.from({ length: 16 }, () => 1) },
      ],
    });
    // Load from 4 clients for at least 3.5 s (15 s when taking the docs' screenshots, so the charts have something
    // to show), and on until the lines are drawn or TIMEOUT passes: a line needs two ticks of the page's one-second
    // poll while requests run, and a loaded machine may give the page fewer ticks in a fixed window.
    const minimum = Date.now() + (SHOTS ? 15_000 : 3500);
    let drawnEnough = false;
    const client = async (): Promise<void> => {
      while (Date.now() < minimum || !drawnEnough) {
        const r = await fetch(`${nereid.url}/v2/models/simple/infer`, { method: 'POST', body });
        await r.arrayBuffer();
      }
    };
    const load = Promise.all([client(), client(), client(), client()]);
    try {
      await page.waitForFunction(`document.querySelector('#chart-rps-legend')?.textContent?.includes('simple')`, {
        timeout: TIMEOUT,
      });
      // A drawn line is pixels of the series color (#1f6feb for the first model, #2f9e44 for p50).
      await page
        .waitForFunction(`((c) => c.rps > 20 && c.p50 > 20 && c.batches > 20)(${COUNT_COLORED_PIXELS})`, {
          timeout: TIMEOUT,
        })
        .catch(() => undefined);
    } finally {
      drawnEnough = true;
      await load;
    }
    const drawn = (await page.evaluate(COUNT_COLORED_PIXELS)) as Record<string, number>;
    assert.ok(drawn.rps > 20, `requests/s line drawn: ${JSON.stringify(drawn)}`);
    assert.ok(drawn.p50 > 20, `p50 line drawn: ${JSON.stringify(drawn)}`);
    assert.ok(drawn.batches > 20, `batch-size bars drawn: ${JSON.stringify(drawn)}`);
    await shot('live');
  });

  it("shows the server's recent log lines, filterable", async () => {
    await open('#/logs');
    await page.waitForFunction(
      `document.querySelector('table.logs tbody')?.textContent?.includes("loaded model 'simple'")`,
      {
        timeout: TIMEOUT,
      },
    );
    await page.type('#log-filter', 'classifier');
    const rows = await page.$$eval('table.logs tbody tr', (trs) => trs.map((tr) => tr.textContent ?? ''));
    assert.ok(rows.length > 0 && rows.every((r) => r.includes('classifier')), rows.join('\n'));
    await page.$eval('#log-filter', (i) => ((i as unknown as { value: string }).value = ''));
    await page.$eval('#log-filter', (i) => i.dispatchEvent(new Event('input')));
    await shot('logs');
  });

  it('unloads a model from its page', async () => {
    await open('#/models/classifier');
    const buttons = await page.waitForSelector('main .row button:nth-of-type(2)', { timeout: TIMEOUT });
    assert.equal(await buttons?.evaluate((b) => b.textContent), 'Unload');
    await buttons?.click();
    await page.waitForFunction(
      `document.querySelector('main h1')?.textContent === 'classifier' && !document.querySelector('#config-text')`,
      {
        timeout: TIMEOUT,
      },
    );
    assert.equal(nereid.server.modelReady('classifier'), false);
  });

  it('BAD CALL - a page of another origin cannot unload a model through the browser', async () => {
    // The other origin: a second local server whose page posts to Nereid as a form and as a no-cors fetch.
    const target = `${nereid.url}/v2/repository/models/simple/unload`;
    const evil: Server = createServer((_req, res) => {
      res.setHeader('Content-Type', 'text/html');
      res.end(
        `<form id="f" method="POST" action="${target}" enctype="text/plain"><input name="{}" value=""></form>` +
          `<script>fetch(${JSON.stringify(target)}, { method: 'POST', mode: 'no-cors', body: '{}' })` +
          `.finally(() => document.getElementById('f').submit());</script>`,
      );
    });
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    try {
      const other = await browser.newPage();
      const responses: number[] = [];
      other.on('response', (r) => {
        if (r.url() === target) responses.push(r.status());
      });
      await other.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      await other.waitForNavigation({ timeout: TIMEOUT }).catch(() => undefined);
      await other.close();
      assert.ok(responses.length > 0 && responses.every((s) => s === 403), `answers: ${responses.join(', ')}`);
      assert.equal(nereid.server.modelReady('simple'), true, 'simple is still loaded');
    } finally {
      evil.close();
    }
  });
});
