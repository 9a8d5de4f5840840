/**
 * One pino JSON record as a line for people: time, level, message, then the record's other fields as `key=value`.
 * Pure formatting, no I/O; the terminal writer (terminal-log.ts) owns the stream.
 */

/** pino's numeric levels. */
const LEVELS: Readonly<Record<number, { name: string; color: number }>> = {
  10: { name: 'TRACE', color: 90 },
  20: { name: 'DEBUG', color: 34 },
  30: { name: 'INFO', color: 32 },
  40: { name: 'WARN', color: 33 },
  50: { name: 'ERROR', color: 31 },
  60: { name: 'FATAL', color: 35 },
};

/**
 * Fields shown in the fixed columns or not at all: the pid is the same on every line, and `load` (the loader's
 * begin/ready/failed marker for machines) repeats what the message says.
 */
const FIXED = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'err', 'load']);

export interface PrettyStyle {
  /** ANSI colors (a terminal that has them, or FORCE_COLOR). */
  color: boolean;
}

/** Wraps `s` in an ANSI SGR code when colors are on. */
export function paint(style: PrettyStyle, code: number, s: string): string {
  return style.color ? `\x1b[${code}m${s}\x1b[0m` : s;
}

function clock(time: unknown): string {
  // `--log-format=ISO8601` makes pino write the time as an ISO string already: keep it as it is.
  if (typeof time === 'string') return time;
  const d = new Date(typeof time === 'number' ? time : Date.now());
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

function value(v: unknown): string {
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : String(Number(v.toFixed(3)));
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  const json = JSON.stringify(v) ?? String(v);
  return json.length > 200 ? `${json.slice(0, 199)}…` : json;
}

/** pino's serialized error: `{ type, message, stack, ... }`. */
interface SerializedError {
  type?: string;
  message?: string;
  stack?: string;
}

/** The record as one line, or several when it carries an error stack (indented under it). */
export function formatRecord(rec: Record<string, unknown>, style: PrettyStyle): string {
  const level = LEVELS[rec.level as number] ?? { name: String(rec.level), color: 0 };
  const msg = typeof rec.msg === 'string' ? rec.msg : '';
  const fields = Object.keys(rec)
    .filter((k) => !FIXED.has(k) && rec[k] !== undefined)
    .map((k) => `${paint(style, 36, k)}=${value(rec[k])}`);
  let line =
    `${paint(style, 2, clock(rec.time))} ${paint(style, level.color, level.name.padEnd(5))} ` +
    `${(rec.level as number) >= 50 ? paint(style, 1, msg) : msg}` +
    (fields.length > 0 ? `  ${fields.join(' ')}` : '');
  const err = rec.err as SerializedError | undefined;
  if (err && typeof err === 'object') {
    const head = err.message && !msg.includes(err.message) ? `${err.type ?? 'Error'}: ${err.message}` : undefined;
    // The stack's first line repeats type and message; the frames are what a reader needs.
    const frames = (err.stack ?? '').split('\n').filter((l) => /^\s+at /.test(l));
    const extra = [...(head ? [`    ${head}`] : []), ...frames.map((f) => `    ${f.trim()}`)];
    if (extra.length > 0) line += `\n${paint(style, 2, extra.join('\n'))}`;
  }
  return line;
}
