import { suggestion } from '../config/config-error.js';
import type { ModelConfig } from '../config/model-config.js';
import { InvalidArgError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { BackendConfig, BackendDescriptor, BackendSettings } from './contract.js';

/**
 * What a backend reads from outside its model file, checked the same way for every backend:
 * - `--backend-config` settings, at start-up (before any model loads): an unknown backend or key fails with the
 *   nearest name, and each backend checks its values (its own parser, the one a load uses).
 * - model `parameters`, at load: Triton hands them to the model, so a key no backend reads may be the model's own.
 *   A near miss of a key the backend reads (case or a typo: `intra_op_threads_count`) fails with the key it reads;
 *   a key Triton's backend reads that Nereid ignores gets one line saying so; any other key one warning. A backend
 *   without a parameter list (python: the model reads its own) is never checked.
 */

/**
 * Settings Triton's core hands every backend (`--backend-config=<key>=<value>` with no backend name, and its own
 * globals): accepted for every backend; `default-max-batch-size` is read by auto-complete where a backend has one.
 */
export const GLOBAL_BACKEND_SETTINGS: readonly string[] = Object.freeze([
  'default-max-batch-size',
  'auto-complete-config',
  'backend-directory',
]);

/** The key of the global settings in the map `--backend-config` is parsed into. */
export const GLOBAL_BACKEND = '';

/**
 * Checks the `--backend-config` settings against the backends and returns them per backend, the global settings
 * merged under each backend's own (a backend's own setting wins, as in Triton). Throws INVALID_ARG naming the
 * first mistake.
 */
export function resolveBackendSettings(
  backends: readonly BackendDescriptor[],
  raw: ReadonlyMap<string, BackendConfig>,
): Map<string, BackendConfig> {
  const names = backends.map((b) => b.name);
  for (const name of raw.keys()) {
    if (name !== GLOBAL_BACKEND && !names.includes(name)) {
      throw new InvalidArgError(
        `--backend-config: unknown backend '${name}'${nearestBackend(name, names)} (Nereid has ${names.join(', ')})`,
      );
    }
  }
  const global = raw.get(GLOBAL_BACKEND) ?? {};
  const out = new Map<string, BackendConfig>();
  for (const b of backends) {
    const own = raw.get(b.name);
    if (own === undefined && Object.keys(global).length === 0) continue;
    const merged = Object.freeze({ ...global, ...own });
    checkBackendConfig(b.name, b.settings, own ?? {}, merged);
    out.set(b.name, merged);
  }
  return out;
}

/** A typo, a part of a name (`torch`), or a name's first 4 letters or more (`onnxrt`); none for shorter guesses. */
function nearestBackend(name: string, names: readonly string[]): string {
  const typo = suggestion(name, names);
  const n = name.toLowerCase();
  if (typo !== '' || n.length < 4) return typo;
  const shared = (a: string): number => [...a].findIndex((c, i) => c !== n[i]);
  const part = names.find((b) => b.includes(n) || n.includes(b) || shared(b) >= 4);
  return part === undefined ? '' : `; did you mean '${part}'?`;
}

function checkBackendConfig(
  name: string,
  settings: BackendSettings | undefined,
  own: BackendConfig,
  merged: BackendConfig,
): void {
  const known = [...(settings?.keys ?? []), ...GLOBAL_BACKEND_SETTINGS];
  // Only the backend's own keys: a global setting is meant for whichever backend reads it.
  for (const key of Object.keys(own)) {
    if (!known.includes(key)) {
      const keys = settings?.keys.length
        ? `the ${name} backend reads ${settings.keys.join(', ')}`
        : `the ${name} backend reads none`;
      throw new InvalidArgError(`--backend-config=${name},${key}: unknown setting${suggestion(key, known)} (${keys})`);
    }
  }
  settings?.check?.(merged);
}

/**
 * The model `parameters` rule (see the top of this file), run once per load; returns the lines for the log
 * (warnings about unknown keys, notes about ignored ones). Throws INVALID_ARG for a near miss.
 */
export function checkModelParameters(
  config: ModelConfig,
  backend: Pick<BackendDescriptor, 'name' | 'settings'>,
  modelName: string,
  /** Keys read for every backend (the sequence batcher's `max_sequence_backlog`). */
  shared: readonly string[] = [],
): { warnings: string[]; notes: string[] } {
  const out = { warnings: [] as string[], notes: [] as string[] };
  const own = backend.settings?.parameters;
  if (own === undefined) return out;
  const reads = [...own, ...shared];
  const ignored = backend.settings?.ignoredParameters ?? {};
  const all = [...reads, ...Object.keys(ignored)];
  for (const key of Object.keys(config.parameters ?? {})) {
    if (reads.includes(key)) continue;
    const why = ignored[key];
    if (why !== undefined) {
      out.notes.push(`model '${modelName}': parameter '${key}' is accepted and has no effect in Nereid: ${why}`);
      continue;
    }
    const near = suggestion(key, all);
    if (near !== '') {
      throw new InvalidArgError(
        `model '${modelName}': parameter '${key}' is not one the ${backend.name} backend reads${near}`,
      );
    }
    out.warnings.push(
      `model '${modelName}': parameter '${key}' is not read by the ${backend.name} backend (passed to the model as Triton does; check its spelling)`,
    );
  }
  return out;
}

/** Logs checkModelParameters' lines: warnings as warnings, notes as info. */
export function logModelParameters(lines: { warnings: string[]; notes: string[] }, log: Logger): void {
  for (const w of lines.warnings) log.warn(w);
  for (const n of lines.notes) log.info(n);
}
