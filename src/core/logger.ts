import { pino, type Logger as Pino } from 'pino';

/** Structured logger. Fields by convention: `model`, `version`, `requestId`. Libraries default to noopLogger. */
export interface Logger {
  error(obj: object | string, msg?: string): void;
  warn(obj: object | string, msg?: string): void;
  info(obj: object | string, msg?: string): void;
  debug(obj: object | string, msg?: string): void;
  trace(obj: object | string, msg?: string): void;
  child(bindings: Record<string, unknown>): Logger;
  /** Lowest enabled level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'silent'. */
  readonly level: string;
}

const noop = (): void => {};
export const noopLogger: Logger = {
  error: noop,
  warn: noop,
  info: noop,
  debug: noop,
  trace: noop,
  child: () => noopLogger,
  level: 'silent',
};

/**
 * Triton's log switches, changed at run time by the logging extension. One object shared by the root logger and
 * every child, so a change reaches loggers created earlier (pino children copy their level when created).
 */
export interface LogSwitches {
  info: boolean;
  warning: boolean;
  error: boolean;
  /** 0 = off; 1 = debug; 2+ = trace. */
  verbose: number;
  format: 'default' | 'ISO8601';
  /** Where logs go ('' = stderr); fixed at start. */
  file: string;
}

export interface LoggerOptions {
  switches?: Partial<LogSwitches>;
  /**
   * Where each JSON line goes instead of stderr or `switches.file`: the command line hands it the terminal
   * formatter and the console's ring of recent lines. Called synchronously, once per record, on the logging thread.
   */
  write?: (line: string) => void;
}

/** The server's logger with its switches. */
export interface ServerLogger extends Logger {
  readonly switches: LogSwitches;
}

function levelOf(s: LogSwitches): string {
  if (s.verbose > 1) return 'trace';
  if (s.verbose > 0) return 'debug';
  if (s.info) return 'info';
  if (s.warning) return 'warn';
  if (s.error) return 'error';
  return 'silent';
}

/**
 * A child's bindings are merged into each record here rather than with pino's `child()`: pino writes a binding and
 * a call's field of the same name both, so `child({ model }).info({ model }, …)` printed `"model"` twice (a JSON
 * line most parsers read as the last value and some reject). Merging keeps one key; the call's value wins. An Error
 * passed as the object goes under `err`, as pino itself would serialize it.
 */
function wrap(p: Pino, s: LogSwitches, b?: Record<string, unknown>): Logger {
  const call = (fn: 'error' | 'warn' | 'info' | 'debug' | 'trace', o: object | string, m?: string): void => {
    if (b === undefined) p[fn](o as object, m);
    else if (typeof o === 'string') p[fn](b, o);
    else if (o instanceof Error) p[fn]({ ...b, err: o }, m ?? o.message);
    else p[fn]({ ...b, ...o }, m);
  };
  return {
    error: (o, m) => s.error && call('error', o, m),
    warn: (o, m) => s.warning && call('warn', o, m),
    info: (o, m) => s.info && call('info', o, m),
    debug: (o, m) => s.verbose > 0 && call('debug', o, m),
    trace: (o, m) => s.verbose > 1 && call('trace', o, m),
    child: (more) => wrap(p, s, { ...b, ...more }),
    get level() {
      return levelOf(s);
    },
  };
}

/**
 * The server's logger: pino JSON lines to stderr (or `switches.file`, or `opts.write`), filtered by the shared
 * switches.
 */
export function createLogger(opts: LoggerOptions = {}): ServerLogger {
  const switches: LogSwitches = {
    info: true,
    warning: true,
    error: true,
    verbose: 0,
    format: 'default',
    file: '',
    ...opts.switches,
  };
  const p = pino(
    {
      level: 'trace',
      base: { pid: process.pid },
      timestamp: () =>
        switches.format === 'ISO8601' ? `,"time":"${new Date().toISOString()}"` : `,"time":${Date.now()}`,
    },
    opts.write ? { write: opts.write } : logDestination(switches.file),
  );
  return Object.assign(wrap(p, switches), { switches });
}

/** Where JSON lines go by default: `file` (appended), or stderr when it is ''. Writes are synchronous. */
export function logDestination(file: string): { write(line: string): void } {
  const dest = pino.destination({ dest: file || 2, sync: true });
  return { write: (line) => void dest.write(line) };
}
