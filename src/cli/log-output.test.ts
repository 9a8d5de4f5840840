import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoadProgress, PROGRESS_AFTER_MS } from './load-progress.js';
import { chooseStyle, cliLogging } from './log-output.js';
import { formatRecord } from './pretty-record.js';
import { readyReport } from './ready-report.js';
import { TerminalLog } from './terminal-log.js';

/** A stream double that records what is written; `isTTY` says whether it plays a terminal. */
function sink(isTTY: boolean): {
  out: string[];
  isTTY: boolean;
  columns: number;
  write(s: string): void;
  hasColors(): boolean;
} {
  const out: string[] = [];
  return { out, isTTY, columns: 100, write: (s: string) => void out.push(s), hasColors: () => false };
}

const SWITCHES = { info: true, warning: true, error: true, verbose: 0, format: 'default' as const, file: '' };

describe('chooseStyle', () => {
  it('gives formatted lines on a terminal and JSON lines elsewhere, unless forced', () => {
    assert.equal(chooseStyle('default', '', { isTTY: true }), 'pretty');
    assert.equal(chooseStyle('ISO8601', '', { isTTY: true }), 'pretty');
    assert.equal(chooseStyle('default', '', { isTTY: false }), 'json');
    assert.equal(chooseStyle('default', '', {}), 'json');
    assert.equal(chooseStyle('json', '', { isTTY: true }), 'json');
    assert.equal(chooseStyle('pretty', '', { isTTY: false }), 'pretty');
    assert.equal(chooseStyle('default', '/tmp/x.log', { isTTY: true }), 'json', 'a --log-file gets JSON lines');
  });
});

describe('formatRecord', () => {
  it('prints time, level, message and the other fields, without the pid', () => {
    const line = formatRecord(
      {
        level: 30,
        time: new Date(2026, 0, 2, 3, 4, 5, 6).getTime(),
        pid: 9,
        model: 'simple',
        seconds: 1.234567,
        msg: "loaded model 'simple'",
      },
      { color: false },
    );
    assert.equal(line, "03:04:05.006 INFO  loaded model 'simple'  model=simple seconds=1.235");
  });

  it('keeps an ISO8601 time as written, quotes values with spaces and colors when asked', () => {
    const line = formatRecord(
      { level: 40, time: '2026-01-02T03:04:05.006Z', msg: 'w', reason: 'two words' },
      { color: true },
    );
    assert.ok(line.includes('2026-01-02T03:04:05.006Z'));
    assert.ok(line.includes('\x1b[33mWARN '), JSON.stringify(line));
    assert.ok(line.includes('reason\x1b[0m="two words"'), JSON.stringify(line));
  });

  it('prints an error stack indented under the line, message once', () => {
    const err = new Error('boom');
    const line = formatRecord(
      { level: 50, time: 0, msg: 'failed: boom', err: { type: 'Error', message: 'boom', stack: err.stack } },
      { color: false },
    );
    const [first, ...rest] = line.split('\n');
    assert.match(first, /ERROR failed: boom$/);
    assert.ok(rest.length > 0 && rest.every((l) => l.startsWith('    at ')), line);
  });
});

describe('TerminalLog', () => {
  it('draws the status line below log lines on a terminal and clears it before the next line', () => {
    const s = sink(true);
    const term = new TerminalLog(s, { color: false });
    term.status('working');
    term.print('a line');
    term.status('');
    assert.deepEqual(s.out, ['working', '\r\x1b[2Ka line\nworking', '\r\x1b[2K']);
  });

  it('never draws a status line where the output is not a terminal', () => {
    const s = sink(false);
    const term = new TerminalLog(s, { color: false });
    term.status('working');
    term.write('{"level":30,"time":0,"msg":"hello"}\n');
    term.write('not json\n');
    assert.equal(s.out.length, 2);
    assert.match(s.out[0], /INFO {2}hello\n$/);
    assert.equal(s.out[1], 'not json\n');
  });
});

describe('LoadProgress', () => {
  it('shows a load only after it has taken a second, and clears when every load ended', () => {
    const s = sink(true);
    const term = new TerminalLog(s, { color: false });
    let now = 1000;
    const progress = new LoadProgress(term, () => now);
    term.write(JSON.stringify({ level: 30, time: 0, model: 'a', load: 'begin', msg: "loading model 'a'" }));
    term.write(JSON.stringify({ level: 30, time: 0, model: 'b', load: 'begin', msg: "loading model 'b'" }));
    now += PROGRESS_AFTER_MS - 1;
    assert.equal(progress.render(), '');
    now += 501;
    assert.match(progress.render(), /^\S loading a 1\.5 s, b 1\.5 s$/);
    term.write(JSON.stringify({ level: 30, time: 0, model: 'a', load: 'ready', msg: "loaded model 'a'" }));
    assert.match(progress.render(), /loading b 1\.5 s$/);
    term.write(JSON.stringify({ level: 50, time: 0, model: 'b', load: 'failed', msg: "failed to load model 'b'" }));
    assert.equal(progress.loading.size, 0);
    // The status line was cleared, and the line printed after it draws no status under itself.
    assert.equal(s.out[s.out.length - 2], '\r\x1b[2K');
    assert.match(s.out[s.out.length - 1], /ERROR failed to load model 'b' {2}model=b\n$/);
  });
});

describe('LoadProgress: what a slow load is doing', () => {
  it("shows a load's latest progress record (a TensorRT plan build's step) after its time, until it ends", () => {
    const s = sink(true);
    const term = new TerminalLog(s, { color: false });
    let now = 1000;
    const progress = new LoadProgress(term, () => now);
    term.write(JSON.stringify({ level: 30, time: 0, model: 'enc', load: 'begin', msg: "loading model 'enc'" }));
    const step = (text: string) => JSON.stringify({ level: 30, time: 0, model: 'enc', progress: text, msg: text });
    term.write(step('Building engine: step 1/9'));
    term.write(step('Building engine: step 2/9'));
    now += PROGRESS_AFTER_MS + 1000;
    assert.match(progress.render(), /loading enc 2\.0 s \(Building engine: step 2\/9\)$/);
    term.write(JSON.stringify({ level: 30, time: 0, model: 'enc', load: 'ready', msg: "loaded model 'enc'" }));
    term.write(JSON.stringify({ level: 30, time: 0, model: 'enc', load: 'begin', msg: "loading model 'enc'" }));
    now += PROGRESS_AFTER_MS + 1000;
    assert.match(progress.render(), /loading enc 2\.0 s$/, "a new load starts without the last one's progress");
    progress.stop();
  });
});

describe('readyReport', () => {
  it("prints Triton's model table with the reason, and the endpoints", () => {
    const text = readyReport(
      [
        { name: 'simple', version: '1', state: 'READY', reason: '' },
        { name: 'broken', version: '', state: 'UNAVAILABLE', reason: 'config.pbtxt:3:1: unknown field' },
        { name: 'later', version: '', state: '', reason: '' },
      ],
      [{ name: 'HTTP', url: 'http://127.0.0.1:8000' }],
      { color: false },
    );
    const lines = text.split('\n');
    assert.match(lines[1], /^\| Model +\| Version \| Status +\| Reason +\|$/);
    assert.ok(
      lines.some((l) => /^\| broken +\| +\| UNAVAILABLE \| config\.pbtxt:3:1: unknown field \|$/.test(l)),
      text,
    );
    assert.ok(
      lines.some((l) => /^\| later +\| +\| UNLOADED/.test(l)),
      text,
    );
    assert.ok(text.endsWith('Endpoints\n  HTTP  http://127.0.0.1:8000'), text);
  });

  it('cuts a long reason to the terminal width', () => {
    const text = readyReport(
      [{ name: 'm', version: '1', state: 'UNAVAILABLE', reason: 'x'.repeat(500) }],
      [],
      { color: false },
      80,
    );
    assert.ok(
      text.split('\n').every((l) => l.length <= 80),
      text,
    );
    assert.ok(text.includes('…'));
  });
});

describe('cliLogging', () => {
  it('keeps every record in the ring of recent lines, in both styles', () => {
    for (const isTTY of [false, true]) {
      const s = sink(isTTY);
      const log = cliLogging({ ...SWITCHES }, 'default', s);
      assert.equal(log.style, isTTY ? 'pretty' : 'json');
      if (!isTTY) continue; // JSON goes to stderr itself; the ring is what is checked here
      log.logger.child({ model: 'm' }).info({ model: 'm' }, 'hello');
      const { lines } = log.recent.since();
      assert.equal(lines.length, 1);
      assert.equal(JSON.parse(lines[0]).msg, 'hello');
      assert.match(s.out.join(''), /INFO {2}hello {2}model=m\n/);
      log.progress?.stop();
    }
  });
});
