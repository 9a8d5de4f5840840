/** Results: targets P1–P5, and latest.json / latest.md / latest.svg (throughput against concurrency). */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Row } from './measure.js';
import type { ModelName } from './models.js';
import type { GrpcSupport, Startup } from './servers/nereid.js';

export interface Target {
  id: string;
  goal: string;
  value: number | null;
  pass: boolean;
  /** What was compared, or why it could not be. */
  note: string;
}

export interface Report {
  mode: 'quick' | 'full';
  date: string;
  duration_s: number;
  machine: string;
  startup: Startup;
  grpc: GrpcSupport;
  servers: { label: string; ready_ms: number }[];
  peers: Record<string, string>;
  skipped: { scenario: string; reason: string }[];
  scenarios: Row[];
  targets: Target[];
}

const find = (rows: Row[], name: string, model: ModelName, c: number): Row | undefined =>
  rows.find((r) => r.name === name && r.model === model && r.concurrency === c);

const missing = (id: string, goal: string, note: string): Target => ({ id, goal, value: null, pass: false, note });

export function computeTargets(rows: Row[], startup: Startup, grpc: boolean, quick: boolean): Target[] {
  const targets: Target[] = [];

  const p1 = 'server-side overhead ≤ 30 µs per request on simple';
  const s3c1 = find(rows, 'S3 nereid http-binary', 'simple', 1);
  if (s3c1?.server_overhead_us === undefined) targets.push(missing('P1', p1, 'S3 simple c=1 not measured'));
  else
    targets.push({
      id: 'P1',
      goal: p1,
      value: s3c1.server_overhead_us,
      pass: s3c1.server_overhead_us <= 30,
      note: 'µs; statistics (success − compute_infer) / count, HTTP binary, concurrency 1 (no queueing)',
    });

  const p2 = 'text_encoder with batching ≥ 95 % of raw throughput at the best batch size';
  const raws = rows.filter((r) => r.scenario === 'S1' && r.model === 'text_encoder' && r.concurrency === 1);
  const batched = rows.filter((r) => r.scenario === 'S5' && r.model === 'text_encoder');
  if (quick || raws.length === 0 || batched.length === 0)
    targets.push(missing('P2', p2, 'text_encoder not measured (--quick)'));
  else {
    const bestRaw = raws.reduce((a, b) => (b.throughput > a.throughput ? b : a));
    const best = batched.reduce((a, b) => (b.throughput > a.throughput ? b : a));
    const value = best.throughput / bestRaw.throughput;
    targets.push({
      id: 'P2',
      goal: p2,
      value,
      pass: value >= 0.95,
      note: `S5 best ${best.throughput.toFixed(0)}/s (c=${best.concurrency}) over raw best ${bestRaw.throughput.toFixed(0)}/s (batch ${bestRaw.batch})`,
    });
  }

  const p3 = 'dynamic batching gain ≥ 3× at concurrency 64 on simple';
  const on = find(rows, 'S5 nereid batching http-binary', 'simple', 64);
  const off = find(rows, 'S3 nereid http-binary', 'simple', 64);
  if (!on || !off) targets.push(missing('P3', p3, 'S5 or S3 simple c=64 not measured'));
  else {
    const value = on.throughput / off.throughput;
    targets.push({
      id: 'P3',
      goal: p3,
      value,
      pass: value >= 3,
      note: `S5 ${on.throughput.toFixed(0)}/s over S3 ${off.throughput.toFixed(0)}/s`,
    });
  }

  targets.push({
    id: 'P4',
    goal: 'start to ready ≤ 1 s and idle RSS ≤ 120 MiB',
    value: startup.readyMs,
    pass: startup.readyMs <= 1000 && startup.idleRssMiB <= 120,
    note: `ready ${startup.readyMs.toFixed(0)} ms, idle RSS ${startup.idleRssMiB.toFixed(1)} MiB (median of ${startup.runs}; plain CLI on examples/model_repository)`,
  });

  const p5 = 'HTTP binary and gRPC throughput at concurrency 64 ≥ 1.2× the best peer (simple)';
  const peers = rows.filter((r) => r.scenario === 'S6' && r.model === 'simple' && r.concurrency === 64);
  const grpcRow = find(rows, 'S4 nereid grpc', 'simple', 64);
  if (!off || peers.length === 0) targets.push(missing('P5', p5, 'S3 or peers at c=64 not measured'));
  else {
    const best = peers.reduce((a, b) => (b.throughput > a.throughput ? b : a));
    const mine = grpcRow ? Math.min(off.throughput, grpcRow.throughput) : off.throughput;
    const value = mine / best.throughput;
    targets.push({
      id: 'P5',
      goal: p5,
      value,
      pass: value >= 1.2 && (grpcRow !== undefined || !grpc),
      note:
        `min(Nereid binary${grpcRow ? ', gRPC' : ''}) ${mine.toFixed(0)}/s over best peer ${best.name} ${best.throughput.toFixed(0)}/s` +
        (grpcRow ? '' : '; gRPC not measured (S4 skipped), so not a pass'),
    });
    if (!grpcRow) targets[targets.length - 1].pass = false;
  }
  return targets;
}

const fmt = (v: number | undefined, digits = 0): string =>
  v === undefined || Number.isNaN(v) ? '–' : v.toFixed(digits);

export function markdown(r: Report): string {
  const lines = [
    `# Nereid benchmark (${r.mode}, ${r.date.slice(0, 16).replace('T', ' ')} UTC, ${r.machine}, ${r.duration_s.toFixed(0)} s)`,
    '',
    'Ratios are to S1 (raw onnxruntime-node in-process, same model and concurrency, batch 1) from the same run.',
    'Load: perf_analyzer 2.50 unless the tool column says otherwise; it shares the 2 cores with the server (S1 has no',
    'client), so ratios to S1 include the client’s cost. S3 is also “S5 batching off”.',
    '',
    '| scenario | model | c | tool | req/s | p50 µs | p99 µs | ratio to raw | overhead µs | CPU µs/req | loop p99 ms | RSS MiB |',
    '|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const s of r.scenarios) {
    lines.push(
      `| ${s.name} | ${s.model} | ${s.concurrency} | ${s.tool} | ${fmt(s.throughput)} | ${fmt(s.p50_us)} | ${fmt(s.p99_us)} | ${fmt(s.ratio_to_raw, 2)} | ${fmt(s.server_overhead_us)} | ${fmt(s.cpu_us_per_request)} | ${fmt(s.event_loop_p99_ms, 1)} | ${fmt(s.rss_mib)} |`,
    );
  }
  lines.push('', '| target | goal | value | pass | note |', '|---|---|--:|---|---|');
  for (const t of r.targets)
    lines.push(
      `| ${t.id} | ${t.goal} | ${t.value === null ? '–' : t.value.toFixed(2)} | ${t.pass ? 'PASS' : 'FAIL'} | ${t.note} |`,
    );
  lines.push(
    '',
    `Start to ready (plain CLI): ${r.startup.readyMs.toFixed(0)} ms; idle RSS ${r.startup.idleRssMiB.toFixed(1)} MiB.`,
  );
  lines.push(
    `Servers under test, spawn to ready: ${r.servers.map((s) => `${s.label} ${s.ready_ms.toFixed(0)} ms`).join(', ')}.`,
  );
  const versions = Object.entries(r.peers).map(([k, v]) => `${k} ${v}`);
  if (versions.length > 0) lines.push(`Python peers: ${versions.join(', ')}.`);
  if (r.skipped.length > 0) {
    lines.push('', 'Skipped:', '');
    for (const s of r.skipped) lines.push(`- ${s.scenario}: ${s.reason}`);
  }
  return lines.join('\n') + '\n';
}

const COLORS = [
  '#222',
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#17becf',
  '#bcbd22',
];

/** Throughput against concurrency, one panel per model, log–log, one line per series (batch-1 rows). */
export function svg(r: Report): string {
  const models = [...new Set(r.scenarios.map((s) => s.model))];
  const series = [...new Set(r.scenarios.filter((s) => s.batch === 1).map((s) => `${s.name} (${s.tool})`))];
  const W = 520;
  const H = 360;
  const pad = { l: 64, r: 16, t: 36, b: 44 };
  const legendH = 18 * series.length + 10;
  const conc = [...new Set(r.scenarios.map((s) => s.concurrency))].sort((a, b) => a - b);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W * models.length}" height="${H + legendH}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
  ];
  models.forEach((model, m) => {
    const rows = r.scenarios.filter((s) => s.model === model && s.batch === 1 && s.throughput > 0);
    const ys = rows.map((s) => s.throughput);
    const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...ys))));
    const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...ys))));
    const x0 = m * W + pad.l;
    const pw = W - pad.l - pad.r;
    const ph = H - pad.t - pad.b;
    const cx = (c: number): number =>
      x0 + (conc.length === 1 ? pw / 2 : (Math.log(c / conc[0]) / Math.log(conc[conc.length - 1] / conc[0])) * pw);
    const cy = (v: number): number => pad.t + ph - (Math.log(v / lo) / Math.log(hi / lo)) * ph;
    out.push(
      `<text x="${x0 + pw / 2}" y="20" text-anchor="middle" font-weight="bold">${model}: throughput (infer/s, log) vs concurrency</text>`,
    );
    out.push(`<rect x="${x0}" y="${pad.t}" width="${pw}" height="${ph}" fill="none" stroke="#999"/>`);
    for (let v = lo; v <= hi; v *= 10) {
      out.push(`<line x1="${x0}" x2="${x0 + pw}" y1="${cy(v)}" y2="${cy(v)}" stroke="#eee"/>`);
      out.push(`<text x="${x0 - 6}" y="${cy(v) + 4}" text-anchor="end">${v >= 1000 ? `${v / 1000}k` : v}</text>`);
    }
    for (const c of conc) out.push(`<text x="${cx(c)}" y="${pad.t + ph + 18}" text-anchor="middle">${c}</text>`);
    out.push(`<text x="${x0 + pw / 2}" y="${pad.t + ph + 36}" text-anchor="middle">concurrency</text>`);
    series.forEach((name, i) => {
      const pts = rows
        .filter((s) => `${s.name} (${s.tool})` === name)
        .sort((a, b) => a.concurrency - b.concurrency)
        .map((s) => [cx(s.concurrency), cy(s.throughput)] as const);
      if (pts.length === 0) return;
      const color = COLORS[i % COLORS.length];
      const dash = name.startsWith('S6') ? ' stroke-dasharray="5,3"' : '';
      out.push(
        `<polyline fill="none" stroke="${color}" stroke-width="2"${dash} points="${pts.map((p) => p.join(',')).join(' ')}"/>`,
      );
      for (const [x, y] of pts) out.push(`<circle cx="${x}" cy="${y}" r="3" fill="${color}"/>`);
    });
  });
  series.forEach((name, i) => {
    const y = H + 14 + 18 * i;
    const dash = name.startsWith('S6') ? ' stroke-dasharray="5,3"' : '';
    out.push(
      `<line x1="${pad.l}" x2="${pad.l + 28}" y1="${y - 4}" y2="${y - 4}" stroke="${COLORS[i % COLORS.length]}" stroke-width="2"${dash}/>`,
    );
    out.push(`<text x="${pad.l + 36}" y="${y}">${name}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

/** Writes <base>.json, <base>.md and <base>.svg; returns the markdown. */
export async function writeReport(r: Report, base: string): Promise<string> {
  await mkdir(dirname(base), { recursive: true });
  const md = markdown(r);
  await writeFile(`${base}.json`, JSON.stringify(r, null, 2) + '\n');
  await writeFile(`${base}.md`, md);
  await writeFile(`${base}.svg`, svg(r));
  return md;
}
