import type { Logger } from '../core/logger.js';
import { Tag } from './wire.js';

/**
 * A front-end thread's Logger: every record goes to the main thread (host.ts), which writes it with the server's
 * logger, so the logging extension's switches, the log file and the format apply to front-end threads as to the
 * main thread. Records are rare here (a protocol logs unexpected errors and transport failures), so nothing is
 * filtered before crossing.
 */
export function forwardingLogger(post: (msg: unknown[]) => void, bindings: Record<string, unknown> = {}): Logger {
  const send =
    (level: string) =>
    (obj: object | string, msg?: string): void => {
      const record = [Tag.LOG, level, bindings, typeof obj === 'string' ? obj : plain(obj), msg];
      try {
        post(record);
      } catch {
        // Something in the record cannot be cloned: keep its text.
        post([Tag.LOG, level, bindings, typeof obj === 'string' ? obj : { text: String(obj) }, msg]);
      }
    };
  return {
    error: send('error'),
    warn: send('warn'),
    info: send('info'),
    debug: send('debug'),
    trace: send('trace'),
    child: (b) => forwardingLogger(post, { ...bindings, ...b }),
    level: 'trace',
  };
}

/** Errors become `{ type, message, stack, code, cause }` (structured clone keeps neither their class nor `code`). */
function plain(obj: object): object {
  if (obj instanceof Error) return errorFields(obj);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) {
    if (typeof v === 'function') continue;
    out[k] = v instanceof Error ? errorFields(v) : v;
  }
  return out;
}

function errorFields(e: Error, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = { type: e.name, message: e.message, stack: e.stack };
  const code = (e as { code?: unknown }).code;
  if (code !== undefined) out.code = code;
  if (e.cause instanceof Error && depth < 4) out.cause = errorFields(e.cause, depth + 1);
  return out;
}
