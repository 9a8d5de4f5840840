/** The cores benchmark's report: medians over rounds, as markdown tables (bench/cores.ts). */

export interface CoresSample {
  /** Front-end thread count, or 'baseline' (the other build of an A/B). */
  label: string;
  protocol: string;
  concurrency: number;
  rps: number;
  p50_us: number;
  p99_us: number;
  errors: number;
  /** Cores' worth of CPU used by the main thread during the window (1 = one core saturated). */
  main_cpu: number;
  /** By the front-end threads together. */
  frontend_cpu: number;
  /** By the whole server process (engine threads included). */
  process_cpu: number;
  main_us_per_request: number;
  process_us_per_request: number;
}

export interface CoresReport {
  date: string;
  duration_s: number;
  machine: string;
  server_cpus: string;
  client_cpus: string;
  server_cores: number;
  loadgen_procs: number;
  model: string;
  batching: string;
  instances: number;
  rounds: number;
  duration_ms: number;
  samples: CoresSample[];
}

type Median = (values: readonly number[]) => number;

/** Median of every numeric field over the rounds of one (label, protocol, concurrency). */
function cells(samples: CoresSample[], median: Median): Map<string, CoresSample> {
  const groups = new Map<string, CoresSample[]>();
  for (const s of samples) {
    const key = `${s.label}|${s.protocol}|${s.concurrency}`;
    groups.set(key, [...(groups.get(key) ?? []), s]);
  }
  const out = new Map<string, CoresSample>();
  for (const [key, group] of groups) {
    const m = (f: (s: CoresSample) => number): number => median(group.map(f));
    out.set(key, {
      ...group[0],
      rps: m((s) => s.rps),
      p50_us: m((s) => s.p50_us),
      p99_us: m((s) => s.p99_us),
      errors: group.reduce((n, s) => n + s.errors, 0),
      main_cpu: m((s) => s.main_cpu),
      frontend_cpu: m((s) => s.frontend_cpu),
      process_cpu: m((s) => s.process_cpu),
      main_us_per_request: m((s) => s.main_us_per_request),
      process_us_per_request: m((s) => s.process_us_per_request),
    });
  }
  return out;
}

const k = (n: number): string => (n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : n.toFixed(0));

export function coresMarkdown(r: CoresReport, median: Median): string {
  const byKey = cells(r.samples, median);
  const labels = [...new Set(r.samples.map((s) => s.label))];
  const protocols = [...new Set(r.samples.map((s) => s.protocol))];
  const concurrencies = [...new Set(r.samples.map((s) => s.concurrency))].sort((a, b) => a - b);
  const get = (label: string, p: string, c: number): CoresSample | undefined => byKey.get(`${label}|${p}|${c}`);
  const head = (first: string): string[] => [
    `| ${first} | ${labels.map((l) => (l === 'baseline' ? 'baseline' : `${l} thr`)).join(' | ')} |`,
    `|---|${labels.map(() => '---:').join('|')}|`,
  ];
  const lines: string[] = [
    `# Cores benchmark (${r.date})`,
    '',
    `${r.machine}; server on CPUs ${r.server_cpus} (${r.server_cores} cores), load from CPUs ${r.client_cpus} ` +
      `(${r.loadgen_procs} processes); \`${r.model}\`, dynamic batching ${r.batching}, ${r.instances} instance(s); ` +
      `${r.duration_ms / 1000} s per cell, median of ${r.rounds} round(s); ${r.duration_s.toFixed(0)} s in all.`,
    '',
    'Columns: front-end threads (`--http-thread-count`; 1 = the main thread serves the protocols itself, no hop).',
  ];
  for (const p of protocols) {
    lines.push(
      '',
      `## ${p === 'grpc' ? 'gRPC' : 'HTTP binary'}: req/s (req/s per server core)`,
      '',
      ...head('concurrency'),
    );
    for (const c of concurrencies) {
      const row = labels.map((l) => {
        const s = get(l, p, c);
        return s ? `${k(s.rps)} (${k(s.rps / r.server_cores)})${s.errors ? ` ⚠${s.errors}` : ''}` : '–';
      });
      lines.push(`| ${c} | ${row.join(' | ')} |`);
    }
    lines.push('', `### ${p}: main thread CPU · µs per request on it · whole process (cores) · p50`, '', ...head('c'));
    for (const c of concurrencies) {
      const row = labels.map((l) => {
        const s = get(l, p, c);
        return s
          ? `${(s.main_cpu * 100).toFixed(0)} % · ${s.main_us_per_request.toFixed(1)} µs · ${s.process_cpu.toFixed(2)} · ${k(s.p50_us)} µs`
          : '–';
      });
      lines.push(`| ${c} | ${row.join(' | ')} |`);
    }
  }
  if (labels.includes('baseline') && labels.includes('1')) {
    lines.push(
      '',
      '## A/B: this build at 1 thread against the baseline build (same run, interleaved)',
      '',
      'req/s swings with what else runs on a shared machine (a server that got less than its core served less: the',
      'process column above); CPU per request (the whole process) is the steadier signal, so both ratios are given',
      '(CPU: baseline over this build, so above 1 is better here too).',
      '',
      '| protocol | c | baseline req/s | 1 thread req/s | ratio | CPU µs/req baseline | 1 thread | ratio | ≥ 0.95 |',
      '|---|---:|---:|---:|---:|---:|---:|---:|:---:|',
    );
    for (const p of protocols) {
      for (const c of concurrencies) {
        const b = get('baseline', p, c);
        const a = get('1', p, c);
        if (!a || !b) continue;
        const ratio = a.rps / b.rps;
        const cpu = b.process_us_per_request / a.process_us_per_request;
        const verdict = ratio >= 0.95 ? 'yes' : cpu >= 0.95 ? 'CPU yes' : 'NO';
        lines.push(
          `| ${p} | ${c} | ${k(b.rps)} | ${k(a.rps)} | ${ratio.toFixed(3)} | ${b.process_us_per_request.toFixed(1)} | ` +
            `${a.process_us_per_request.toFixed(1)} | ${cpu.toFixed(3)} | ${verdict} |`,
        );
      }
    }
  }
  return `${lines.join('\n')}\n`;
}
