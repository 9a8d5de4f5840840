import { createLogger, logDestination, type LogSwitches, type ServerLogger } from '../core/logger.js';
import { LogRing } from '../console/log-ring.js';
import { LoadProgress } from './load-progress.js';
import { TerminalLog, type TextSink } from './terminal-log.js';

/** How log records are written: JSON lines for machines, formatted lines for people. */
export type LogStyle = 'json' | 'pretty';

/**
 * `--log-format` → style. `json` and `pretty` force one; Triton's `default` and `ISO8601` (which choose the time
 * format) give formatted lines when the logs go to a terminal and JSON lines otherwise: into `--log-file`, a pipe,
 * a container's log collector. The check is on the stream the lines are written to (stderr).
 */
export function chooseStyle(format: string, file: string, out: { isTTY?: boolean }): LogStyle {
  if (format === 'json') return 'json';
  if (format === 'pretty') return 'pretty';
  return file === '' && out.isTTY === true ? 'pretty' : 'json';
}

/** Colors on a terminal that has them (Node reads NO_COLOR, FORCE_COLOR, TERM); elsewhere only with FORCE_COLOR. */
function wantsColor(out: TextSink & { hasColors?: () => boolean }): boolean {
  if (out.isTTY === true) return out.hasColors?.() ?? true;
  const force = process.env.FORCE_COLOR;
  return force !== undefined && force !== '0' && force !== 'false';
}

/** The command line's logging: the logger, the console's recent lines, and the terminal writer when pretty. */
export interface CliLogging {
  logger: ServerLogger;
  style: LogStyle;
  recent: LogRing;
  terminal?: TerminalLog;
  progress?: LoadProgress;
}

/**
 * Builds the server's logger for `nereid serve`. Every record goes to the ring of recent lines (the web console)
 * and to its destination: the terminal writer (pretty), or stderr / `--log-file` (JSON).
 */
export function cliLogging(switches: LogSwitches, format: string, out: TextSink = process.stderr): CliLogging {
  const style = chooseStyle(format, switches.file, out);
  const recent = new LogRing();
  if (style === 'json') {
    const dest = logDestination(switches.file);
    const logger = createLogger({
      switches,
      write: (line) => {
        recent.push(line);
        dest.write(line);
      },
    });
    return { logger, style, recent };
  }
  // Formatted lines asked for with --log-file go into the file, without colors or a status line.
  if (switches.file !== '') out = logDestination(switches.file);
  const terminal = new TerminalLog(out, { color: wantsColor(out) });
  const progress = new LoadProgress(terminal);
  const logger = createLogger({
    switches,
    write: (line) => {
      recent.push(line);
      terminal.write(line);
    },
  });
  return { logger, style, recent, terminal, progress };
}
