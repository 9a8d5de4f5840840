import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { BackendRegistry } from '../backends/registry.js';
import type { ModelConfig } from '../config/model-config.js';
import { InvalidArgError } from '../core/errors.js';
import { ENSEMBLE_PLATFORM } from './normalize.js';

/**
 * Beginners' mistakes with Triton's folder layout (`<repository>/<model>/<version>/<file>`), each named for what it
 * is. Without these, all of them end in normalize's "cannot tell which backend runs it … name the file model.onnx",
 * even when the file is named model.onnx: the backend is sniffed from the version folders' files, and there are none.
 */

/** The file names backends look for by default (`model.onnx`, `model.py`, …). */
function defaultFileNames(registry: BackendRegistry): string[] {
  return registry.all.map((b) => b.defaultModelFilename).filter((f) => f !== '');
}

/** Names of the plain files (not folders) directly in `dir`; none when it cannot be read. */
async function filesIn(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile() || e.isSymbolicLink()).map((e) => e.name);
}

/**
 * Throws a message of its own when the model folder's layout is why no backend can be told: no version folder (a
 * model file lying beside config.pbtxt), or version folders that are all empty. Ensembles (whose version folders
 * are empty by design) are left alone, and so are empty folders of configs that name their backend or platform
 * (the identity backend needs no file; the others say which file is missing).
 */
export async function checkModelLayout(
  name: string,
  dir: string,
  versions: readonly number[],
  files: ReadonlySet<string>,
  config: ModelConfig,
  registry: BackendRegistry,
): Promise<void> {
  if (config.platform === ENSEMBLE_PLATFORM) return;
  const named = Boolean(config.backend || config.platform);
  const known = config.default_model_filename ? [config.default_model_filename] : defaultFileNames(registry);
  const example =
    `${name}/1/${known[0] ?? 'model.onnx'}` + (known.length > 1 ? ` (or ${known.slice(1).join(', ')})` : '');
  if (versions.length === 0) {
    const stray = (await filesIn(dir)).filter((f) => known.includes(f));
    if (stray.length > 0) {
      throw new InvalidArgError(
        `model '${name}' has no version folder: ${stray.map((f) => `${name}/${f}`).join(', ')} must be inside a ` +
          `numbered version folder, as ${stray.map((f) => `${name}/1/${f}`).join(', ')} (Triton's layout: ` +
          '<repository>/<model>/<version>/<model file>)',
      );
    }
    if (named) return; // the loader names the file this backend expects
    throw new InvalidArgError(
      `model '${name}' has no version folder: put its model file in a numbered folder, e.g. ${example} ` +
        "(Triton's layout: <repository>/<model>/<version>/<model file>)",
    );
  }
  if (named || files.size > 0) return;
  const folders = versions.map((v) => `${name}/${v}`).join(', ');
  throw new InvalidArgError(
    `model '${name}': version folder${versions.length > 1 ? 's' : ''} ${folders} ${versions.length > 1 ? 'are' : 'is'} ` +
      `empty: put the model file in it, e.g. ${example}`,
  );
}

/**
 * Why a `--model-repository` folder is one model's folder rather than a repository of model folders, or undefined:
 * it holds config.pbtxt, or a numbered folder holding a model file itself (a version folder).
 */
export async function modelFolderSigns(repository: string, registry: BackendRegistry): Promise<string | undefined> {
  const top = await filesIn(repository);
  const known = defaultFileNames(registry);
  const signs: string[] = [];
  if (top.includes('config.pbtxt')) signs.push('config.pbtxt');
  const entries = await readdir(repository, { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    if (!e.isDirectory() || !/^[1-9][0-9]*$/.test(e.name)) continue;
    const inside = (await filesIn(join(repository, e.name))).filter((f) => known.includes(f));
    if (inside.length > 0) signs.push(`version folder ${e.name}/ with ${inside.join(', ')}`);
  }
  return signs.length > 0 ? signs.join(' and ') : undefined;
}

/**
 * The model folders in `dir` when `dir` is a repository rather than a model folder (no config.pbtxt and no
 * version folder of its own, subfolders that do have them); empty otherwise.
 */
export async function modelFoldersIn(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  if (entries.some((e) => e.name === 'config.pbtxt' || (e.isDirectory() && /^[1-9][0-9]*$/.test(e.name)))) return [];
  const models: string[] = [];
  for (const e of entries) {
    if (!e.isDirectory() || e.name.startsWith('.')) continue;
    const inner = await readdir(join(dir, e.name), { withFileTypes: true }).catch(() => []);
    if (inner.some((i) => i.name === 'config.pbtxt' || (i.isDirectory() && /^[1-9][0-9]*$/.test(i.name)))) {
      models.push(e.name);
    }
  }
  return models.sort();
}
