import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, connect } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A real OpenTelemetry Collector (built by scripts/setup-otelcol.sh: OTLP receiver + file exporter) on a free
 * loopback port, whose received spans the tests read back from its file exporter's JSON lines.
 */

export const OTELCOL_SETUP = 'bash scripts/setup-otelcol.sh';

/** The collector binary, or why there is none: under CI that fails the suite at once, elsewhere it skips. */
export function otelcolBinary(): { path: string } | { skip: string } {
  const path = process.env.NEREID_OTELCOL ?? join(homedir(), '.cache/nereid/otelcol/otelcol-nereid');
  if (existsSync(path)) return { path };
  const why = `no OpenTelemetry Collector at ${path}; build it with: ${OTELCOL_SETUP}`;
  if (process.env.CI) throw new Error(`${why} (CI runs it before the tests)`);
  return { skip: why };
}

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  events: string[];
  /** The resource's attributes. */
  resource: Record<string, unknown>;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as { port: number }).port;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

function attrs(list: { key: string; value: Record<string, unknown> }[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of list ?? []) {
    const v = a.value;
    out[a.key] = v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue));
  }
  return out;
}

export class Collector {
  #proc: ChildProcess | undefined;
  readonly port: number;
  readonly #dir: string;
  readonly #bin: string;

  private constructor(bin: string, dir: string, port: number) {
    this.#bin = bin;
    this.#dir = dir;
    this.port = port;
  }

  /** The file exporter's output: one OTLP/JSON document a line. */
  get file(): string {
    return join(this.#dir, 'spans.jsonl');
  }

  /** `host:port/v1/traces`, as Triton's `--trace-config opentelemetry,url=` takes it. */
  get url(): string {
    return `127.0.0.1:${this.port}/v1/traces`;
  }

  static async start(bin: string): Promise<Collector> {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-otelcol-'));
    const c = new Collector(bin, dir, await freePort());
    await c.restart();
    return c;
  }

  /** Starts the collector (again, on the same port and file). */
  async restart(): Promise<void> {
    const config = `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${this.port}
exporters:
  file:
    path: ${this.file}
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`;
    await writeFile(join(this.#dir, 'config.yaml'), config);
    const proc = spawn(this.#bin, ['--config', join(this.#dir, 'config.yaml')], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    proc.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    this.#proc = proc;
    for (let i = 0; i < 300; i++) {
      if (proc.exitCode !== null) throw new Error(`the collector exited (${proc.exitCode}): ${stderr}`);
      if (await reachable(this.port)) return;
      await sleep(50);
    }
    throw new Error(`the collector did not listen on ${this.port}: ${stderr}`);
  }

  async stop(): Promise<void> {
    const proc = this.#proc;
    this.#proc = undefined;
    if (proc === undefined || proc.exitCode !== null) return;
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGTERM');
    await exited;
  }

  /** Every span the collector has written so far. */
  async spans(): Promise<OtlpSpan[]> {
    let text = '';
    try {
      text = await readFile(this.file, 'utf8');
    } catch {
      return [];
    }
    const out: OtlpSpan[] = [];
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      let doc: { resourceSpans?: Record<string, never>[] };
      try {
        doc = JSON.parse(line) as typeof doc;
      } catch {
        continue; // a line still being written
      }
      for (const rs of doc.resourceSpans ?? []) {
        const resource = attrs((rs as { resource?: { attributes?: never } }).resource?.attributes);
        for (const ss of (rs as { scopeSpans?: { spans?: Record<string, never>[] }[] }).scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            const span = s as unknown as {
              traceId: string;
              spanId: string;
              parentSpanId?: string;
              name: string;
              kind: number;
              attributes?: never;
              events?: { name: string }[];
            };
            out.push({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId ?? '',
              name: span.name,
              kind: span.kind,
              attributes: attrs(span.attributes),
              events: (span.events ?? []).map((e) => e.name),
              resource,
            });
          }
        }
      }
    }
    return out;
  }

  /** Waits (bounded) until `pred` holds for the spans received; returns them. */
  async waitFor(pred: (spans: OtlpSpan[]) => boolean, what: string, ms = 30_000): Promise<OtlpSpan[]> {
    const until = Date.now() + ms;
    for (;;) {
      const spans = await this.spans();
      if (pred(spans)) return spans;
      if (Date.now() > until) throw new Error(`collector: timed out waiting for ${what}; got ${spans.length} spans`);
      await sleep(100);
    }
  }

  async close(): Promise<void> {
    await this.stop();
    await rm(this.#dir, { recursive: true, force: true });
  }
}

function reachable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
