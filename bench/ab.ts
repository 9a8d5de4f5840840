/**
 * A/B throughput check between two builds of Nereid: is "after" at least 95 % of "before"?
 *
 *   node --import tsx bench/ab.ts --before /tmp/nereid-before/dist/cli/main.js \
 *     [--after dist/cli/main.js] [--rounds 3] [--interval-ms 2000] [--only S3:simple:64,…] [--out ab]
 *   npm run bench:ab -- --before …      (builds this checkout first)
 *
 * Rows: `simple` and `text_encoder` over HTTP with binary tensors, dynamic batching off (S3) and on (S5),
 * perf_analyzer at concurrency 1 and 64 — the same load as bench/run.ts. The machines are noisy shared 2-core
 * boxes, so the two builds never run side by side and never in separate sessions: each round starts a fresh
 * server of "before", measures, stops it, then does the same for "after" (per scenario), and the report takes the
 * median of the rounds for each side. A row whose ratio is under the threshold is measured once more (the same
 * number of interleaved rounds, that row only) and both ratios are reported, so noise and a regression can be
 * told apart. Progress goes to stderr, the table to stdout and bench/results/<out>.{md,json}.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  abMarkdown,
  passes,
  summarize,
  THRESHOLD,
  verdict,
  type AbReport,
  type AbRow,
  type Sample,
  type Side,
  type Summary,
} from './ab-report.js';
import { progress, ROOT } from './common.js';
import { measureServer, type Row } from './measure.js';
import { MODELS, type ModelName } from './models.js';
import { perfAnalyzerAvailable, runPerfAnalyzer } from './perf-analyzer.js';
import { makeRepos, type BenchRepos } from './repos.js';
import { startNereid } from './servers/nereid.js';
import type { BenchServer } from './servers/server.js';

const SIDES: readonly Side[] = ['before', 'after'];
const SCENARIOS = [
  { id: 'S3', batching: false },
  { id: 'S5', batching: true },
] as const;
type ScenarioId = (typeof SCENARIOS)[number]['id'];
const MODEL_NAMES: readonly ModelName[] = ['simple', 'text_encoder'];
const CONCURRENCY = [1, 64] as const;

interface Build {
  main: string;
  /** `git describe`-ish label of the worktree the build lives in, for the report. */
  commit: string;
}

interface Cell {
  key: string;
  scenario: ScenarioId;
  model: ModelName;
  concurrency: number;
  samples: Record<Side, Sample[]>;
  errors: string[];
}

const { values: opts } = parseArgs({
  options: {
    before: { type: 'string' },
    after: { type: 'string', default: join(ROOT, 'dist/cli/nereid.cjs') },
    rounds: { type: 'string', default: '3' },
    'interval-ms': { type: 'string', default: '2000' },
    'max-trials': { type: 'string', default: '4' },
    only: { type: 'string' },
    out: { type: 'string', default: 'ab' },
  },
});

function build(path: string | undefined, flag: string): Build {
  if (!path) throw new Error(`${flag} <path to dist/cli/main.js> is required`);
  const main = resolve(path);
  if (!existsSync(main)) throw new Error(`${flag} ${main} does not exist: build that checkout first`);
  let commit = 'unknown';
  try {
    const git = (...args: string[]): string =>
      execFileSync('git', args, { cwd: dirname(main), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    commit = git('rev-parse', '--short', 'HEAD');
    // A build of a tree with uncommitted source changes is not the commit it names; say so in the report.
    const dirty = git('-C', git('rev-parse', '--show-toplevel'), 'status', '--porcelain', '--', 'src');
    if (dirty.trim()) commit += ' (uncommitted changes in src/)';
  } catch {
    /* not in a git checkout: the path alone identifies it */
  }
  return { main, commit };
}

function cellsFor(only: string | undefined): Cell[] {
  const all: Cell[] = [];
  for (const { id } of SCENARIOS)
    for (const model of MODEL_NAMES)
      for (const concurrency of CONCURRENCY)
        all.push({
          key: `${id}:${model}:${concurrency}`,
          scenario: id,
          model,
          concurrency,
          samples: { before: [], after: [] },
          errors: [],
        });
  if (!only) return all;
  const wanted = new Set(only.split(','));
  const unknown = [...wanted].filter((k) => !all.some((c) => c.key === k));
  if (unknown.length) throw new Error(`--only: unknown rows ${unknown.join(', ')} (e.g. S3:simple:64)`);
  return all.filter((c) => wanted.has(c.key));
}

interface Plan {
  builds: Record<Side, Build>;
  repos: BenchRepos;
  intervalMs: number;
  maxTrials: number;
}

/** One server of one build for one scenario: every selected row of that scenario, then the server stops. */
async function measureSide(plan: Plan, side: Side, round: number, scenario: ScenarioId, cells: Cell[]): Promise<void> {
  const repo = SCENARIOS.find((s) => s.id === scenario)?.batching ? plan.repos.on : plan.repos.off;
  let server: BenchServer;
  try {
    server = await startNereid(repo, false, plan.builds[side].main);
  } catch (err) {
    const msg = `round ${round} ${side}: server did not start: ${(err as Error).message.split('\n').slice(0, 3).join(' | ')}`;
    progress(msg);
    for (const c of cells) c.errors.push(msg);
    return;
  }
  try {
    for (const cell of cells) {
      const head = {
        name: `${scenario} nereid ${side} http-binary`,
        scenario,
        server: side,
        model: cell.model,
        protocol: 'http-binary',
        concurrency: cell.concurrency,
        tool: 'perf_analyzer',
      } as const;
      try {
        const row: Row = await measureServer(server, head, () =>
          runPerfAnalyzer({
            model: MODELS[cell.model],
            url: server.http,
            protocol: 'http',
            format: 'binary',
            concurrency: cell.concurrency,
            measurementIntervalMs: plan.intervalMs,
            maxTrials: plan.maxTrials,
          }),
        );
        const { throughput, p50_us, p99_us, cpu_us_per_request } = row;
        cell.samples[side].push({ round, throughput, p50_us, p99_us, cpu_us_per_request });
        progress(
          `round ${round} ${side.padEnd(6)} ${cell.key.padEnd(20)} ${throughput.toFixed(0).padStart(6)}/s  p50 ${p50_us.toFixed(0)} µs`,
        );
      } catch (err) {
        const msg = `round ${round} ${side} ${cell.key}: ${(err as Error).message.split('\n')[0]}`;
        cell.errors.push(msg);
        progress(`FAILED ${msg}`);
      }
    }
  } finally {
    await server.close();
  }
}

/** `rounds` interleaved rounds over `cells`: per round and scenario, before then after, each a fresh server. */
async function runRounds(plan: Plan, cells: Cell[], rounds: number, label: string): Promise<void> {
  for (let round = 1; round <= rounds; round++) {
    progress(`${label}: round ${round}/${rounds} (load average ${loadavg()[0].toFixed(2)})`);
    for (const { id } of SCENARIOS) {
      const mine = cells.filter((c) => c.scenario === id);
      if (mine.length === 0) continue;
      for (const side of SIDES) await measureSide(plan, side, round, id, mine);
    }
  }
}

async function main(): Promise<void> {
  if (!perfAnalyzerAvailable()) throw new Error('.venv/bin/perf_analyzer missing: run `bash scripts/setup-python.sh`');
  const started = performance.now();
  const load0 = loadavg()[0];
  const builds = { before: build(opts.before, '--before'), after: build(opts.after, '--after') };
  const rounds = Number(opts.rounds);
  const intervalMs = Number(opts['interval-ms']);
  const maxTrials = Number(opts['max-trials']);
  if (!(rounds >= 1) || !(intervalMs > 0) || !(maxTrials >= 3))
    throw new Error('--rounds ≥ 1, --interval-ms > 0 and --max-trials ≥ 3 are required');
  const cells = cellsFor(opts.only);
  progress(`before ${builds.before.main} (${builds.before.commit})`);
  progress(`after  ${builds.after.main} (${builds.after.commit})`);
  progress(`${cells.length} rows × ${rounds} rounds × 2 builds, perf_analyzer windows ${intervalMs} ms`);

  const repos = await makeRepos();
  const plan: Plan = { builds, repos, intervalMs, maxTrials };
  const rows: AbRow[] = [];
  try {
    await runRounds(plan, cells, rounds, 'A/B');
    const firsts = new Map(cells.map((c) => [c.key, summarize(c.samples)]));
    const below = cells
      .filter((c) => (firsts.get(c.key) as Summary).ratio < THRESHOLD)
      .map((c) => ({ ...c, samples: { before: [], after: [] }, errors: [] }));
    if (below.length) {
      progress(`under ${THRESHOLD}: ${below.map((c) => c.key).join(', ')}; measuring those rows once more`);
      await runRounds(plan, below, rounds, 'recheck');
    }
    for (const c of cells) {
      const first = firsts.get(c.key) as Summary;
      const again = below.find((b) => b.key === c.key);
      const recheck = again ? summarize(again.samples) : undefined;
      rows.push({
        key: c.key,
        scenario: c.scenario,
        model: c.model,
        concurrency: c.concurrency,
        first,
        recheck,
        verdict: verdict(first, recheck),
        samples: c.samples,
        recheck_samples: again?.samples,
        errors: [...c.errors, ...(again?.errors ?? []).map((e) => `recheck ${e}`)],
      });
    }
  } finally {
    await repos.cleanup();
  }

  const durationS = (performance.now() - started) / 1000;
  const report: AbReport = {
    date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
    machine: `${cpus().length} CPUs, Node ${process.version}`,
    duration: `${durationS.toFixed(0)} s`,
    before: `${builds.before.main} @ ${builds.before.commit}`,
    after: `${builds.after.main} @ ${builds.after.commit}`,
    load: `windows of ${intervalMs} ms, at most ${maxTrials} trials`,
    rounds: String(rounds),
    loadavg: `${load0.toFixed(2)} / ${loadavg()[0].toFixed(2)}`,
    rows,
  };
  const md = abMarkdown(report);
  const out = join(ROOT, 'bench/results', opts.out);
  await writeFile(`${out}.md`, md);
  await writeFile(
    `${out}.json`,
    JSON.stringify({ ...report, threshold: THRESHOLD, duration_s: durationS, builds }, null, 2) + '\n',
  );
  process.stdout.write(md);
  progress(`done in ${durationS.toFixed(0)} s: ${out}.{md,json}`);
  if (!rows.every((r) => passes(r.verdict))) process.exitCode = 1;
}

await main();
