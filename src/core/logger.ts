import { pino } from 'pino';

/** Structured logger. Fields by convention: `model`, `version`, `requestId`. Libraries default to noopLogger. */
export interface Logger {
  error(obj: object | string, msg?: string): void;
  warn(obj: object | string, msg?: string): void;
  info(obj: object | string, msg?: string): void;
  debug(obj: object | string, msg?: string): void;
  trace(obj: object | string, msg?: string): void;
  child(bindings: Record<string, unknown>): Logger;
  /** pino level name: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'silent'. */
  level: string;
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

export interface LoggerOptions {
  level?: string;
  /** Write to this file descriptor or path instead of stderr. */
  destination?: number | string;
}

/** The server's logger: pino, JSON lines to stderr by default. */
export function createLogger(opts: LoggerOptions = {}): Logger {
  return pino(
    { level: opts.level ?? 'info', base: { pid: process.pid } },
    pino.destination({ dest: opts.destination ?? 2, sync: true }),
  ) as unknown as Logger;
}
