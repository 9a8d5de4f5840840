import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseModelConfigOrThrow } from '../../src/config/index.js';
import { runTuneCommand } from '../../src/cli/tune-command.js';
import { startScratchServer } from '../../src/cli/tune-scratch.js';
import { writeOutputs } from '../../src/tools/tune/output.js';
import { markdownReport, summaryTable } from '../../src/tools/tune/report.js';
import { runTune, type TuneOptions, type TuneReport } from '../../src/tools/tune/tune.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

/**
 * `nereid tune` on CPU: short runs (a few seconds of budget, short points), so what is asserted is the report's
 * structure, what the server observed and ratios measured in one run — never wall-clock numbers.
 */

const FIXTURES = fileURLToPath(new URL('../fixtures/tune/', import.meta.url));
const SIMPLE = join(EXAMPLES, 'simple');
const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

function options(modelDir: string, extra: Partial<TuneOptions> = {}): TuneOptions {
  return {
    modelDir,
    mode: 'quick',
    objective: 'throughput',
    constraints: {},
    concurrency: [2],
    timeBudgetS: 4,
    measurementMs: 300,
    shapes: new Map(),
    startScratch: startScratchServer,
    ...extra,
  };
}

/** The rule the written config follows: the winner only if it is at least the default in the confirmation. */
function assertWrittenBeatsDefault(r: TuneReport): void {
  assert.ok(r.written, 'a config was chosen');
  const def = r.candidates[0];
  assert.equal(def.label, 'default', 'the default config is measured first');
  if (r.written.label === 'default') return;
  const c = r.confirmation;
  assert.ok(c, 'a winner other than the default is re-measured against it');
  assert.ok(c.rounds >= 1 && c.default.throughput > 0 && c.best.throughput > 0);
  assert.ok(c.ratio >= 0.95, `written config reached ${c.ratio} of the default in the confirmation`);
}

/** Temporary models the server still has loaded. */
async function tuneModelsLoaded(url: string): Promise<string[]> {
  const res = await fetch(`${url}/v2/repository/index`, { method: 'POST', body: '{}' });
  const index = (await res.json()) as { name: string; state?: string }[];
  return index.filter((m) => m.name.includes('__tune_') && m.state === 'READY').map((m) => m.name);
}

describe('nereid tune', () => {
  let out: string;
  before(async () => {
    out = await mkdtemp(join(tmpdir(), 'nereid-tune-test-'));
  });
  after(() => rm(out, { recursive: true, force: true }));

  it('tunes simple in quick mode: progress, table, report files, a written config that loads and serves', async () => {
    const lines: string[] = [];
    const outcome = await runTune(options(SIMPLE, { progress: (l) => lines.push(l) }));
    const r = outcome.report;
    assert.ok(lines.length >= 1 && /configs, \d+ points · best .* left/.test(lines[0]), lines[0]);
    assert.ok(r.candidates.length >= 2, 'the default and at least one candidate');
    for (const c of r.candidates.filter((x) => !x.refused && !x.failed)) {
      assert.ok(c.points.length >= 1);
      assert.ok(c.points.every((p) => p.concurrency === 2 && p.requests > 0 && p.p99Ms >= p.p50Ms));
    }
    assert.ok(r.ceiling && r.ceiling.throughput > 0, 'the load generator ceiling is measured');
    assert.match(r.tolerance, /integers, BOOL and BYTES exact/);
    assertWrittenBeatsDefault(r);
    const dir = join(out, 'simple');
    const written = await writeOutputs(outcome, dir);
    assert.deepEqual(
      written.files.map((f) => f.slice(dir.length + 1)),
      ['config.pbtxt', 'report.md', 'chart.svg', 'report.json'],
    );
    const md = await readFile(join(dir, 'report.md'), 'utf8');
    assert.match(md, /## Summary/);
    assert.match(md, /Load generator ceiling/);
    const svg = await readFile(join(dir, 'chart.svg'), 'utf8');
    assert.match(svg, /^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    assert.ok((svg.match(/<circle/g) ?? []).length >= r.candidates.filter((c) => c.points.length > 0).length);
    assert.equal((JSON.parse(await readFile(join(dir, 'report.json'), 'utf8')) as TuneReport).model, 'simple');
    const text = await readFile(join(dir, 'config.pbtxt'), 'utf8');
    assert.match(text, /^# Written by nereid tune .* at \d{4}-/);
    assert.equal(parseModelConfigOrThrow(text, 'config.pbtxt').name, 'simple');

    // The written config in a repository of its own: it loads and answers.
    const repo = await mkdtemp(join(tmpdir(), 'nereid-tune-repo-'));
    await cp(SIMPLE, join(repo, 'simple'), { recursive: true });
    await writeFile(join(repo, 'simple', 'config.pbtxt'), text);
    const s = await startNereid({ repositories: [repo] });
    try {
      const data = Array.from({ length: 16 }, (_, i) => i);
      const res = await fetch(`${s.url}/v2/models/simple/infer`, {
        method: 'POST',
        body: JSON.stringify({
          inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], data })),
        }),
      });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { outputs: { name: string; data: number[] }[] };
      assert.deepEqual(
        body.outputs.find((o) => o.name === 'OUTPUT0')?.data,
        data.map((x) => 2 * x),
      );
    } finally {
      await s.close();
      await rm(repo, { recursive: true, force: true });
    }
  });

  it('tunes text_encoder (a partial config, variable shapes) for p99 latency', async () => {
    const { report: r, config } = await runTune(
      options(join(EXAMPLES, 'text_encoder'), { objective: 'latency', concurrency: [1] }),
    );
    assertWrittenBeatsDefault(r);
    assert.equal(r.objective, 'latency');
    assert.ok(config, 'a config is chosen');
    // The written config is the one read plus the winner's changes: still partial (auto-complete fills it).
    assert.equal(config.input, undefined);
    assert.equal(config.backend, 'onnxruntime');
  });

  it('changes the model folder only with --write, keeping the old config beside it; the console shows the report', async () => {
    const before = await readFile(join(SIMPLE, 'config.pbtxt'), 'utf8');
    const copy = join(out, 'write', 'simple');
    await cp(SIMPLE, copy, { recursive: true });
    const printed: string[] = [];
    const errs: string[] = [];
    const io = { out: (t: string) => printed.push(t), err: (t: string) => errs.push(t) };
    const args = ['--time-budget', '2', '--measurement-ms', '250', '--concurrency', '1'];
    assert.equal(await runTuneCommand([copy, ...args, '--write'], io), 0, errs.join(''));
    const text = await readFile(join(copy, 'config.pbtxt'), 'utf8');
    assert.match(text, /^# Written by nereid tune/);
    assert.equal(await readFile(join(copy, 'config.pbtxt.before-tune'), 'utf8'), before);
    assert.equal(printed.join(''), text, 'with no --output the config is printed');
    assert.match(errs.join(''), /^#\s+config\s+conc\s+infer\/s\s+p50 ms\s+p99 ms/m);
    assert.equal(await readFile(join(SIMPLE, 'config.pbtxt'), 'utf8'), before, 'the examples were only read');

    // A server of that repository: the model loads with its tune/ folder, and the web console shows the report.
    const s = await startNereid({ repositories: [join(out, 'write')] });
    try {
      assert.equal((await fetch(`${s.url}/v2/models/simple/ready`)).status, 200);
      const res = await fetch(`${s.url}/console/api/models/simple/tune`);
      assert.equal(res.status, 200);
      const shown = (await res.json()) as TuneReport;
      assert.equal(shown.model, 'simple');
      assert.equal(shown.candidates[0].label, 'default');
      assert.ok(shown.written);
      const none = await fetch(`${s.url}/console/api/models/untuned/tune`);
      assert.equal(none.status, 404);
      assert.match(
        ((await none.json()) as { error: string }).error,
        /no tune report for model 'untuned': run 'nereid tune/,
      );
      const bad = await fetch(`${s.url}/console/api/models/..%2Fsimple/tune`);
      assert.equal(bad.status, 400, 'a name that leaves the repository is refused');
    } finally {
      await s.close();
    }
  });

  it('says so when no config meets the constraints, and lists the closest', async () => {
    const errs: string[] = [];
    const code = await runTuneCommand(
      [
        SIMPLE,
        '--time-budget',
        '3',
        '--measurement-ms',
        '250',
        '--concurrency',
        '1',
        '--latency-budget-ms',
        '0.000001',
        '--output',
        join(out, 'none'),
      ],
      { out: () => undefined, err: (s) => errs.push(s) },
    );
    const text = errs.join('');
    assert.equal(code, 1, text);
    assert.match(text, /no configuration met the constraints \(p99 ≤ 0\.000001 ms\)/);
    // Which configs are closest depends on what load the machine is under: only that some are listed, with numbers.
    assert.match(text, /^ {2}\S.* @ c=1: [\d.]+\/s, p99 [\d.]+ ms$/m);
    const report = JSON.parse(await readFile(join(out, 'none', 'report.json'), 'utf8')) as TuneReport;
    assert.ok(report.noneMet && report.noneMet.closest.length >= 1);
    assert.equal(report.written, undefined);
    await assert.rejects(readFile(join(out, 'none', 'config.pbtxt')), { code: 'ENOENT' });
  });

  it('exhaustive mode starts with the default and lists what the budget left unexplored', async () => {
    const { report: r } = await runTune(options(SIMPLE, { mode: 'exhaustive', timeBudgetS: 2, measurementMs: 250 }));
    const total = r.dimensions.reduce((n, d) => n * d.settings.length, 1);
    assert.equal(r.mode, 'exhaustive');
    assert.equal(r.candidates[0].label, 'default');
    assert.ok(r.unexplored.length > 0, 'a 2 s budget does not reach every combination');
    assert.ok(r.candidates.length + r.unexplored.length <= total);
    assert.match(markdownReport(r), /Not explored \(time budget\): .*instances=/);
  });

  it('refuses a GPU memory budget for CPU candidates before starting anything', async () => {
    await assert.rejects(
      runTune(options(SIMPLE, { constraints: { maxGpuMemoryMb: 1000 } })),
      /--max-gpu-memory-mb needs GPU candidates \(--kind gpu or KIND_GPU in the config\)/,
    );
  });

  it('refuses a candidate whose answers differ from the default config', async () => {
    const { report: r } = await runTune(
      options(join(FIXTURES, 'count_dependent'), { concurrency: [1], instanceCounts: [2], timeBudgetS: 60 }),
    );
    const two = r.candidates.find((c) => c.label === 'instances=2×CPU');
    assert.ok(two, `the 2-instance candidate was tried: ${r.candidates.map((c) => c.label).join(', ')}`);
    assert.match(
      two.refused ?? '',
      /answers differ from the default config's \(request 0: 'OUTPUT0'\[0\] is .*, the default config answers/,
    );
    assert.deepEqual(two.points, [], 'a refused candidate is not measured');
    assert.equal(r.written?.label, 'default');
    assert.match(summaryTable(r), /^2 +instances=2×CPU .* refused: answers differ/m);
  });
});

describe('nereid tune --url', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({ modelControlMode: 'explicit', loadModels: ['simple'] });
  });
  after(() => s?.close());

  it('loads candidates under temporary names, unloads them after, and leaves the served model alone', async () => {
    const { report: r } = await runTune(options(SIMPLE, { url: s.url, timeBudgetS: 3 }));
    assert.equal(r.target, s.url);
    assert.ok(r.candidates.length >= 1);
    assert.deepEqual(await tuneModelsLoaded(s.url), []);
    const ready = await fetch(`${s.url}/v2/models/simple/ready`);
    assert.equal(ready.status, 200, 'the served model is untouched');
  });

  it('is refused clearly where the server does not run code sent in load requests (a python model)', async () => {
    await assert.rejects(runTune(options(join(FIXTURES, 'count_dependent'), { url: s.url })), (err: Error) => {
      assert.match(err.message, /refused to load a candidate .*the load request carries code/);
      assert.match(err.message, /--allow-code-in-load-requests/);
      return true;
    });
    assert.deepEqual(await tuneModelsLoaded(s.url), []);
  });

  it('unloads what it loaded when interrupted', async () => {
    const ac = new AbortController();
    let loadedWhileRunning: string[] = [];
    const run = runTune(
      options(SIMPLE, {
        url: s.url,
        timeBudgetS: 30,
        signal: ac.signal,
        progress: () => {
          if (ac.signal.aborted) return;
          // Aborted while the probe (the default, kept loaded) is still there.
          void tuneModelsLoaded(s.url).then((names) => {
            loadedWhileRunning = names;
            ac.abort(new Error('SIGINT'));
          });
        },
      }),
    );
    // Either answer is right for an interrupt: the report of what was measured, or the cancellation itself.
    const outcome = await run.catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
    assert.ok(loadedWhileRunning.length >= 1, 'temporary models were loaded while it ran');
    if (!(outcome instanceof Error)) assert.equal(outcome.report.interrupted, true);
    else assert.match(outcome.message, /interrupted|SIGINT|cancel/i);
    assert.deepEqual(await tuneModelsLoaded(s.url), [], 'nothing left loaded');
  });

  it('on SIGINT (the CLI) unloads what it loaded, writes what it measured and exits 130', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-tune-sigint-'));
    const args = [SIMPLE, '--url', s.url, '--time-budget', '60', '--measurement-ms', '400', '--concurrency', '1'];
    const child = spawn(
      process.execPath,
      ['--conditions=nereid-source', '--import', 'tsx', MAIN, 'tune', ...args, '--output', dir],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    let loadedAtSignal: string[] = [];
    child.stderr.on('data', (chunk: Buffer) => {
      const first = !/^tune: \d+ configs/m.test(stderr);
      stderr += chunk.toString('utf8');
      if (first && /^tune: \d+ configs/m.test(stderr)) {
        void tuneModelsLoaded(s.url).then((names) => {
          loadedAtSignal = names;
          child.kill('SIGINT');
        });
      }
    });
    const [code] = (await once(child, 'exit')) as [number | null];
    try {
      assert.equal(code, 130, stderr);
      assert.ok(loadedAtSignal.length >= 1, 'temporary models were loaded when the signal came');
      assert.match(stderr, /tune: interrupted; unloading the temporary models/);
      assert.deepEqual(await tuneModelsLoaded(s.url), [], 'nothing left loaded');
      const report = JSON.parse(await readFile(join(dir, 'report.json'), 'utf8')) as TuneReport;
      assert.equal(report.interrupted, true);
      assert.equal(report.candidates[0]?.label, 'default', 'what was measured before the signal is reported');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('nereid tune --url on a server that refuses the repository API', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({ modelControlMode: 'none' });
  });
  after(() => s?.close());

  it('refuses clearly and names what the server needs', async () => {
    await assert.rejects(runTune(options(SIMPLE, { url: s.url })), (err: Error) => {
      assert.match(
        err.message,
        /refused to load a candidate through its repository API: .*model-control-mode=explicit/,
      );
      return true;
    });
  });
});

describe('nereid tune --url on a server whose request size limit is below the model', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({ modelControlMode: 'explicit', httpMaxInputSize: 256 });
  });
  after(() => s?.close());

  it('refuses clearly, naming the limit', async () => {
    await assert.rejects(runTune(options(SIMPLE, { url: s.url })), (err: Error) => {
      assert.match(
        err.message,
        /repository API: request JSON size of \d+ bytes exceeds the maximum allowed input size of 256 bytes/,
      );
      return true;
    });
    assert.deepEqual(await tuneModelsLoaded(s.url), []);
  });
});
