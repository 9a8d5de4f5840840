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

function wrap(p: Pino, s: LogSwitches): Logger {
  return {
    error: (o, m) => s.error && p.error(o as object, m),
    warn: (o, m) => s.warning && p.warn(o as object, m),
    info: (o, m) => s.info && p.info(o as object, m),
    debug: (o, m) => s.verbose > 0 && p.debug(o as object, m),
    trace: (o, m) => s.verbose > 1 && p.trace(o as object, m),
    child: (b) => wrap(p.child(b), s),
    get level() {
      return levelOf(s);
    },
  };
}

/** The server's logger: pino JSON lines to stderr (or `switches.file`), filtered by the shared switches. */
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
    pino.destination({ dest: switches.file || 2, sync: true }),
  );
  return Object.assign(wrap(p, switches), { switches });
}
