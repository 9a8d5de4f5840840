import { InvalidArgError } from '../../core/errors.js';

/**
 * JSON nesting limit for the bodies whose values are walked recursively after parsing (load `config`, logging and
 * trace settings, repository bodies). JSON.parse itself is iterative in V8, but a 100k-deep value reaching a recursive
 * walker (config normalization, JSON.stringify in a message) overflowed the stack: a 500 "Maximum call stack size
 * exceeded". Triton answers 400 with this wording. Inference bodies are not scanned: their only nested value is
 * tensor `data`, whose flattening has its own limit (json-tensor.ts), and scanning a large JSON tensor costs ~15 % of
 * parsing it.
 */
export const MAX_JSON_NESTING_DEPTH = 100;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/**
 * Throws INVALID_ARG when `json` nests arrays/objects deeper than `limit`. One pass over the bytes (or UTF-16 units),
 * skipping string contents; malformed JSON is left for the parser to report.
 */
export function checkJsonDepth(json: string | Uint8Array, limit = MAX_JSON_NESTING_DEPTH, what = 'request JSON'): void {
  const n = json.length;
  const at = typeof json === 'string' ? (i: number): number => json.charCodeAt(i) : (i: number): number => json[i];
  let depth = 0;
  let inString = false;
  for (let i = 0; i < n; i++) {
    const c = at(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > limit) {
        throw new InvalidArgError(`${what}: JSON nesting depth exceeds maximum allowed limit (${limit})`);
      }
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
}
