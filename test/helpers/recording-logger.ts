import type { Logger } from '../../src/index.js';

/** One entry a RecordingLogger kept. */
export interface LogEntry {
  level: string;
  obj: Record<string, unknown>;
  msg: string;
}

/**
 * A Logger that keeps every entry (its children write to the same list), so a test can count the warnings a load
 * gave or find the line an error points at.
 */
export function recordingLogger(entries: LogEntry[] = []): Logger & { entries: LogEntry[] } {
  const at =
    (level: string) =>
    (obj: object | string, msg?: string): void => {
      entries.push(typeof obj === 'string' ? { level, obj: {}, msg: obj } : { level, obj: { ...obj }, msg: msg ?? '' });
    };
  const logger: Logger & { entries: LogEntry[] } = {
    error: at('error'),
    warn: at('warn'),
    info: at('info'),
    debug: at('debug'),
    trace: at('trace'),
    child: () => logger,
    level: 'trace',
    entries,
  };
  return logger;
}
