import { readdirSync, realpathSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { resolve, sep } from 'node:path';
import { ERROR_CLASSES, NereidError } from '../core/errors.js';

/**
 * No absolute server path in an answer to a client: a load error or a model's reason says `simple/1/model.onnx`,
 * never `/srv/models/simple/1/model.onnx`. Paths under a model repository become relative to that repository,
 * paths in a load request's override folder relative to it (`<model>/1/model.onnx`), and any other absolute path
 * of this machine keeps only its last segment (`…/libfoo.so`); names that only look like paths (ONNX node names,
 * URL routes) are kept whole. The server log keeps the full text: only what clients see is rewritten.
 */

/** An override model folder: `<tmp>/nereid-overrides-<pid>-XXXXXX/load-XXXXXX/<model>`; the prefix is dropped. */
const OVERRIDE_PREFIX = /(?:\/[^\s'"`]*)?\/nereid-overrides-\d+-[^/\s'"`]+\/load-[^/\s'"`]+\//g;

/**
 * An absolute path: a `/` that starts the message or follows a space, quote, bracket, `=` or `:`, then two or more
 * segments of path characters. Only those whose first folder exists at this machine's `/` are server paths (below).
 */
const ABSOLUTE_PATH = /(^|[\s'"`(=[:,])(\/(?:[^\s'"`()[\]{},;:/]+\/)+)([^\s'"`()[\]{},;:/]*)/g;

/** Folders to strip, longest first, each ending with the separator. */
function prefixes(paths: readonly string[]): string[] {
  const out = new Set<string>();
  for (const p of paths) {
    if (p === '' || p === sep) continue;
    for (const q of [resolve(p), realOrSelf(p)]) out.add(q.endsWith(sep) ? q : q + sep);
  }
  return [...out].sort((a, b) => b.length - a.length);
}

function realOrSelf(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
}

export class PathRedactor {
  readonly #roots: string[];

  /** `roots`: folders whose paths are shown relative to them (the model repositories). */
  constructor(roots: readonly string[] = []) {
    this.#roots = prefixes(roots);
  }

  redact(message: string): string {
    let out = message.replace(OVERRIDE_PREFIX, '');
    for (const root of this.#roots) out = out.split(root).join('');
    return redactAbsolutePaths(out);
  }

  /** The same error (same class and code) with its message redacted; the original stays its cause for the log. */
  redactError(err: unknown): unknown {
    if (!(err instanceof NereidError) || err.unexpected) return err;
    const message = this.redact(err.message);
    if (message === err.message) return err;
    return redactedCopy(err, message);
  }
}

type ErrorCtor = new (message: string, options?: { cause?: unknown }) => NereidError;

/** `err`'s class and code with another message, `err` as the cause. */
export function redactedCopy(err: NereidError, message: string): NereidError {
  return new (ERROR_CLASSES[err.code] as ErrorCtor)(message, { cause: err });
}

/**
 * The names in this machine's `/`, read once. A slash-separated name whose first folder is not among them cannot
 * be a path of this server, and is kept whole: ONNX node names (`/encoder/layer.0/MatMul`, torch.onnx.export's
 * naming), URL paths in advice (`POST /v2/models/m/generate_stream`), placeholders (`/path/lib.so`). Unreadable
 * `/`: every such name is treated as a path (redacting too much is the safe side).
 */
const ROOT_NAMES: ReadonlySet<string> | undefined = (() => {
  try {
    return new Set(readdirSync('/'));
  } catch {
    return undefined;
  }
})();

function isServerPath(dir: string): boolean {
  const first = dir.split('/')[1] ?? '';
  return ROOT_NAMES === undefined || ROOT_NAMES.has(first);
}

const FALLBACK_ROOTS = prefixes([process.cwd(), tmpdir(), homedir()]);

/**
 * The safety net every client-facing error goes through (protocol/kserve/client-error.ts): override folders and the
 * working, temp and home folders are stripped, and any other absolute path of this machine keeps its last segment.
 */
export function redactAbsolutePaths(message: string): string {
  let out = message.replace(OVERRIDE_PREFIX, '');
  for (const root of FALLBACK_ROOTS) out = out.split(root).join('');
  return out.replace(ABSOLUTE_PATH, (m: string, lead: string, dir: string, last: string) =>
    isServerPath(dir) ? `${lead}…/${last}` : m,
  );
}
