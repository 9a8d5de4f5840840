import { InvalidArgError, UnavailableError } from '../core/errors.js';
import type { ModelRepository } from '../repository/manager.js';
import { SERVER_DEFAULTS } from './defaults.js';
import type { InferenceServerOptions } from './options.js';

/**
 * The models a server loads before it starts serving, by Triton's model-control mode: explicit loads only
 * `--load-model` names (after a scan, so the rest can be loaded later); none and poll load everything. With
 * `exitOnError` (Triton's default) a model that fails to load fails start-up with every reason.
 */
export async function loadAtStart(repo: ModelRepository, opts: InferenceServerOptions): Promise<void> {
  const mode = opts.modelControlMode ?? SERVER_DEFAULTS.modelControlMode;
  if (mode === 'explicit') {
    await repo.scan();
    if ((opts.loadModels ?? []).length > 0) await repo.loadAll(opts.loadModels);
  } else {
    if ((opts.loadModels ?? []).length > 0) {
      throw new InvalidArgError('--load-model can only be used with --model-control-mode=explicit');
    }
    await repo.loadAll();
  }
  const failures = repo.failures();
  if (failures.length > 0 && (opts.exitOnError ?? SERVER_DEFAULTS.exitOnError)) {
    await repo.close();
    throw new UnavailableError(
      `failed to load ${failures.map((f) => `'${f.name}': ${f.reason}`).join('; ')} (start with --exit-on-error=false to serve the other models)`,
    );
  }
}
