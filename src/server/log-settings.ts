import { InvalidArgError, UnsupportedError } from '../core/errors.js';
import type { LogSwitches } from '../core/logger.js';
import type { LogSettings } from './api.js';

/** Triton's logging-extension view of the logger's switches. */
export function readLogSettings(s: LogSwitches): LogSettings {
  return {
    log_file: s.file,
    log_info: s.info,
    log_warning: s.warning,
    log_error: s.error,
    log_verbose_level: s.verbose,
    log_format: s.format,
  };
}

/**
 * Applies a partial logging-extension update to the switches. The update is validated as a whole first, so a bad
 * key changes nothing; `log_file` is refused (a remote caller must not choose where the server writes).
 */
export function applyLogSettings(s: LogSwitches, update: Partial<Record<keyof LogSettings, unknown>>): void {
  const next = { ...s };
  for (const [key, value] of Object.entries(update)) {
    const bool = (): boolean => {
      if (typeof value !== 'boolean')
        throw new InvalidArgError(`log setting '${key}' must be a boolean, got ${JSON.stringify(value)}`);
      return value;
    };
    switch (key) {
      case 'log_file':
        // A remote caller must not choose where the server writes (CVE-2024-0087).
        throw new UnsupportedError('log file location can not be updated through network protocol');
      case 'log_info':
        next.info = bool();
        break;
      case 'log_warning':
        next.warning = bool();
        break;
      case 'log_error':
        next.error = bool();
        break;
      case 'log_verbose_level':
        if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
          throw new InvalidArgError(
            `log setting 'log_verbose_level' must be a non-negative integer, got ${JSON.stringify(value)}`,
          );
        }
        next.verbose = value;
        break;
      case 'log_format':
        if (value !== 'default' && value !== 'ISO8601') {
          throw new InvalidArgError(
            `log setting 'log_format' must be "default" or "ISO8601", got ${JSON.stringify(value)}`,
          );
        }
        next.format = value;
        break;
      default:
        throw new InvalidArgError(
          `unknown log setting '${key}'; known: log_file, log_info, log_warning, log_error, log_verbose_level, log_format`,
        );
    }
  }
  Object.assign(s, next);
}
