import { rm } from 'node:fs/promises';
import { modelConfigFromJson } from '../config/index.js';
import type { ModelConfig } from '../config/model-config.js';
import { abortable } from '../core/abortable.js';
import { InternalError, InvalidArgError, NereidError, NotFoundError } from '../core/errors.js';
import type { ModelRepository } from '../repository/manager.js';
import { confineLoadRequest } from '../repository/confine.js';
import { checkModelName, writeOverrideDir } from '../repository/overrides.js';
import type { LoadOptions } from './api.js';
import { refuseCodeInLoadRequest } from './code-trust.js';

/**
 * The model repository extension's load and unload, as Triton answers them: model names checked for traversal, a
 * JSON `config` override read like Triton's JsonStringToMessage, `file:` overrides written into a checked temp
 * folder (they need `config`), an atomic (re)load that keeps the serving model when the new one fails.
 * Returns the model's (trimmed) name.
 */
export async function loadByRequest(
  repo: ModelRepository,
  rawName: string,
  opts: LoadOptions & { signal?: AbortSignal; allowCode?: boolean },
): Promise<string> {
  const name = checkModelName(rawName);
  const files = opts.files ?? new Map();
  if (files.size > 0 && opts.config === undefined) {
    throw new InvalidArgError(`load of '${name}': file overrides need the 'config' parameter as well (Triton's rule)`);
  }
  let config: ModelConfig | undefined;
  try {
    config = opts.config === undefined ? undefined : modelConfigFromJson(opts.config, `load request for '${name}'`);
  } catch (err) {
    // Triton's clients look for "failed to load" in this answer.
    const e = NereidError.from(err);
    throw new InvalidArgError(`failed to load '${name}', ${e.message}`, { cause: err });
  }
  refuseCodeInLoadRequest(name, config, files, opts.allowCode === true, repo.backends);
  let dir: string;
  let tempDir: string | undefined;
  if (files.size > 0) {
    ({ dir, tempDir } = await writeOverrideDir(name, files));
  } else {
    const loc = (await repo.scan()).get(name);
    if (!loc) {
      throw new InternalError(
        `failed to load '${name}': no model folder named '${name}' in the model repositories; add it there or send its files as 'file:' overrides`,
      );
    }
    dir = loc.dir;
  }
  // A failed load's override folder is removed at once: the lifecycle removes those it retires, this covers a
  // refused request and a model that failed as a whole (current, serving nothing). rm with force is idempotent.
  const dropTemp = (): Promise<void> =>
    tempDir === undefined ? Promise.resolve() : rm(tempDir, { recursive: true, force: true });
  try {
    await confineLoadRequest({ model: name, dir, config, files, backends: repo.backends });
  } catch (err) {
    await dropTemp();
    throw err;
  }
  // From here the folder belongs to the lifecycle: a load this caller stopped waiting for may still succeed with it.
  const model = await repo.load(name, { dir, config, tempDir }, opts.signal);
  const ready = model.state === 'READY' && [...model.versions.values()].every((v) => v.state === 'READY');
  if (!ready) {
    if (model.state !== 'READY') await dropTemp();
    throw new InvalidArgError(`load failed for model '${name}': ${model.reason || 'no version is ready'}`);
  }
  return name;
}

/**
 * Unloads a loaded model or a known one (idempotent); a name the repositories never had is NOT_FOUND. Names are not
 * checked (Triton checks them on load only): an unload touches no file, and `../etc` is just a name never loaded.
 */
export async function unloadByRequest(
  repo: ModelRepository,
  rawName: string,
  signal?: AbortSignal,
  dependents = false,
): Promise<string> {
  const name = rawName.trim();
  const model = repo.get(name);
  if (!model && !repo.found().has(name)) {
    throw new NotFoundError(
      `failed to unload '${name}': no model named '${name}' is loaded or in the model repositories`,
    );
  }
  // With `unload_dependents`, the ensembles using it go too (else they turn UNAVAILABLE naming it). An unload is
  // not undone when its caller goes away: the caller only stops waiting.
  const unloading = repo.unload(name, { dependents });
  if (signal !== undefined) await abortable(unloading, signal, `unload of '${name}' was cancelled by the client`);
  else await unloading;
  return name;
}
