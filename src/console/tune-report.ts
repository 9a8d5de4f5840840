import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { NotFoundError } from '../core/errors.js';
import { checkModelName } from '../repository/overrides.js';

/** Where `nereid tune --write` leaves its report in a model's folder (src/tools/tune/output.ts writes it). */
export const TUNE_REPORT_PATH = ['tune', 'report.json'] as const;

/** A report larger than this is not a tune report: refused rather than read into memory. */
const MAX_REPORT_BYTES = 8 << 20;

/**
 * The tune report of model `name` as JSON text: `<repository>/<name>/tune/report.json` in the first repository
 * that has one (the folder the repository would serve the model from). The name is checked as a load's is, so it
 * cannot leave the repository. NOT_FOUND, saying how to make one, when there is none.
 */
export async function readTuneReport(repositories: readonly string[], name: string): Promise<string> {
  const model = checkModelName(name);
  for (const repo of repositories) {
    const path = join(repo, model, ...TUNE_REPORT_PATH);
    const info = await stat(path).catch(() => undefined);
    if (info === undefined || !info.isFile() || info.size > MAX_REPORT_BYTES) continue;
    const text = await readFile(path, 'utf8');
    try {
      JSON.parse(text);
    } catch {
      continue;
    }
    return text;
  }
  throw new NotFoundError(
    `no tune report for model '${model}': run 'nereid tune <model folder> --write' to tune it and keep its report in the model's folder`,
  );
}
