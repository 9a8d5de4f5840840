/**
 * Problems found in a model configuration, with where they are. The parser, JSON reader and validator all
 * return these so a user sees every problem at once, formatted like a compiler diagnostic.
 */
import { InvalidArgError } from '../core/errors.js';

/** One problem in a model configuration. `line` and `column` are 1-based; 0 when not known (JSON, validation). */
export interface ConfigError {
  /** The file (or other source, e.g. "load request") the configuration came from. */
  file: string;
  line: number;
  column: number;
  /** Field path from the root, e.g. `ModelConfig.input[0].dims`. */
  path: string;
  /** What is wrong and, where we can tell, how to fix it. */
  message: string;
}

/** `file:line:column: message`, or `file: message` when the position is not known. */
export function formatConfigError(error: ConfigError): string {
  if (error.line > 0) return `${error.file}:${error.line}:${error.column}: ${error.message}`;
  return `${error.file}: ${error.message}`;
}

/** One InvalidArgError whose message lists every problem, one per line. */
export function configErrorsToException(errors: readonly ConfigError[]): InvalidArgError {
  const lines = errors.map(formatConfigError);
  const head =
    errors.length === 1 ? 'invalid model configuration' : `invalid model configuration (${errors.length} problems)`;
  return new InvalidArgError(`${head}:\n${lines.join('\n')}`);
}

/**
 * Edit distance counting insertions, deletions, substitutions and swaps of neighbours (optimal string
 * alignment), so a transposed typo like `TYPE_FP23` is one edit from `TYPE_FP32`.
 */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/**
 * The closest candidate to `word`, if it is close enough to be a likely typo (case-insensitive; distance at
 * most a third of the word's length, at least 1 and at most 3).
 */
export function closestName(word: string, candidates: Iterable<string>): string | undefined {
  const limit = Math.min(3, Math.max(1, Math.floor(word.length / 3)));
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const d = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return bestDistance <= limit ? best : undefined;
}

/** `; did you mean 'x'?` or the empty string. */
export function suggestion(word: string, candidates: Iterable<string>): string {
  const best = closestName(word, candidates);
  return best === undefined ? '' : `; did you mean '${best}'?`;
}
