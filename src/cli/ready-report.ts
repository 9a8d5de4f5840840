import { NEREID_VERSION } from '../core/version.js';
import type { ModelIndexEntry } from '../core/wire.js';
import type { RunningNereid } from '../serve.js';
import type { CliLogging } from './log-output.js';
import { paint, type PrettyStyle } from './pretty-record.js';

/** One endpoint as a person would call it. */
export interface Endpoint {
  name: string;
  url: string;
}

/** Where each started endpoint answers; a wildcard bind address is shown as loopback, as `httpUrl` does. */
export function endpointsOf(running: RunningNereid, consoleOn: boolean): Endpoint[] {
  const host = (a: string | undefined): string => {
    if (a === undefined || a === '0.0.0.0' || a === '') return '127.0.0.1';
    if (a === '::') return '[::1]';
    return a.includes(':') ? `[${a}]` : a;
  };
  const out: Endpoint[] = [];
  if (running.httpUrl !== undefined) out.push({ name: 'HTTP', url: running.httpUrl });
  if (running.grpcPort !== undefined)
    out.push({ name: 'gRPC', url: `${host(running.grpcAddress)}:${running.grpcPort}` });
  if (running.metricsPort !== undefined) {
    out.push({ name: 'Metrics', url: `http://${host(running.metricsAddress)}:${running.metricsPort}/metrics` });
  }
  if (consoleOn && running.httpUrl !== undefined) out.push({ name: 'Console', url: `${running.httpUrl}/console/` });
  return out;
}

/** A row's status as Triton prints it: `READY`, `UNAVAILABLE`, or `UNLOADED` for a model found but not loaded. */
function statusOf(r: ModelIndexEntry): string {
  return r.state === '' ? 'UNLOADED' : r.state;
}

/**
 * Triton's start-up model table (Model | Version | Status) with the reason in a fourth column, then the endpoints.
 * `width` is the terminal's: a long reason is cut to fit rather than wrapped into an unreadable table.
 */
export function readyReport(
  rows: readonly ModelIndexEntry[],
  endpoints: readonly Endpoint[],
  style: PrettyStyle,
  width = 120,
): string {
  const head = ['Model', 'Version', 'Status', 'Reason'];
  const cells = rows.map((r) => [r.name, r.version, statusOf(r), r.reason.replace(/\s+/g, ' ')]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const fixed = widths[0] + widths[1] + widths[2] + 13;
  widths[3] = Math.max(head[3].length, Math.min(widths[3], width - fixed));
  const cut = (s: string, w: number): string => (s.length > w ? `${s.slice(0, w - 1)}…` : s.padEnd(w));
  const rule = `+${widths.map((w) => '-'.repeat(w + 2)).join('+')}+`;
  const line = (c: string[], color?: (i: number, s: string) => string): string =>
    `| ${c.map((s, i) => (color ? color(i, cut(s, widths[i])) : cut(s, widths[i]))).join(' | ')} |`;
  const statusColor = (i: number, s: string): string => {
    if (i !== 2) return s;
    return paint(style, s.startsWith('READY') ? 32 : s.startsWith('UNLOADED') ? 2 : 31, s);
  };
  const table = [rule, line(head), rule, ...cells.map((c) => line(c, statusColor)), rule];
  if (cells.length === 0) table.splice(3, 0, `| ${'(no models)'.padEnd(rule.length - 4)} |`);
  const nameWidth = Math.max(...endpoints.map((e) => e.name.length), 0);
  const eps = endpoints.map((e) => `  ${e.name.padEnd(nameWidth)}  ${paint(style, 4, e.url)}`);
  return [...table, '', 'Endpoints', ...eps].join('\n');
}

/**
 * The ready line, as Triton ends its start-up: on a terminal the model table and the endpoints under it; in JSON
 * the same facts as fields of the ready record (`models`, `endpoints`), one line a log pipeline can parse.
 */
export function announceReady(log: CliLogging, running: RunningNereid, ms: number, consoleOn: boolean): void {
  const rows = running.server.repositoryIndex();
  const endpoints = endpointsOf(running, consoleOn);
  // "ready" only when /v2/health/ready says so: under strict readiness a model that failed keeps the server unready.
  const ready = running.server.isReady();
  const msg = ready ? `nereid ${NEREID_VERSION} ready` : notReadyLine(rows);
  const say = (fields: Record<string, unknown>): void =>
    ready ? log.logger.info(fields, msg) : log.logger.warn(fields, msg);
  if (log.terminal === undefined) {
    const urls = Object.fromEntries(endpoints.map((e) => [e.name.toLowerCase(), e.url]));
    say({ ms: Math.round(ms), models: rows, endpoints: urls });
    return;
  }
  log.progress?.stop();
  say({ ms: Math.round(ms) });
  if (!log.logger.switches.info) return;
  log.terminal.print(readyReport(rows, endpoints, log.terminal.style, process.stderr.columns ?? 120));
}

/** The start-up line when the server serves but is not ready (strict readiness, the default, and a model not READY). */
function notReadyLine(rows: readonly ModelIndexEntry[]): string {
  // Models never loaded (explicit mode) do not count against readiness: name only those that failed or are loading.
  const down = rows.filter((r) => r.state !== 'READY' && r.state !== '').map((r) => `'${r.name}'`);
  const what =
    down.length === 1 ? `model ${down[0]} is` : down.length === 0 ? 'models are' : `models ${down.join(', ')} are`;
  return (
    `nereid ${NEREID_VERSION} started but not ready: ${what} not READY (strict readiness; ` +
    `--strict-readiness=false is ready without them)`
  );
}
