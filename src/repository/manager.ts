import { readdir, readFile, rm, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Backend, BackendConfig } from '../backends/backend.js';
import { configErrorsToException, parseModelConfigOrThrow, validateModelConfig } from '../config/index.js';
import type { ModelConfig } from '../config/model-config.js';
import { NereidError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { ModelStats } from '../core/stats.js';
import { createScheduler } from '../scheduler/index.js';
import { completeConfig } from './autocomplete.js';
import type { Model, ModelVersion } from './model.js';
import { normalizeConfig } from './normalize.js';
import { fingerprint, listVersions, scanRepositories, selectVersions, type ModelLocation } from './scan.js';

export interface RepositoryOptions {
  repositories: readonly string[];
  backends: readonly Backend[];
  /** `--backend-config` values per backend name. */
  backendConfig: ReadonlyMap<string, BackendConfig>;
  autoComplete: boolean;
  logger: Logger;
}

/**
 * Owns the models of the repositories: scans, loads every version its policy selects, records each
 * failure as UNAVAILABLE with a reason, and unloads. (Poll and explicit control build on load/unload.)
 */
export class ModelRepository {
  readonly #opts: RepositoryOptions;
  readonly #models = new Map<string, Model>();
  #found = new Map<string, ModelLocation>();
  #closed = false;

  constructor(opts: RepositoryOptions) {
    this.#opts = opts;
  }

  get(name: string): Model | undefined {
    return this.#models.get(name);
  }

  list(): Model[] {
    return [...this.#models.values()];
  }

  /** Model folders found by the last scan (loaded or not). */
  found(): ReadonlyMap<string, ModelLocation> {
    return this.#found;
  }

  /** Model folders of the repositories as last scanned. */
  async scan(): Promise<Map<string, ModelLocation>> {
    const { models, duplicates } = await scanRepositories(this.#opts.repositories);
    this.#found = new Map(models.map((m) => [m.name, m]));
    for (const [name, repos] of duplicates) {
      const model: Model = {
        name,
        dir: '',
        state: 'UNAVAILABLE',
        reason: `model '${name}' appears in more than one repository: ${repos.join(', ')}`,
        versions: new Map(),
        labels: new Map(),
        fingerprint: '',
      };
      if (!this.#models.has(name)) this.#models.set(name, model);
      this.#opts.logger.error({ model: name }, model.reason);
    }
    return new Map(models.map((m) => [m.name, m]));
  }

  /**
   * Loads the named models, or every model found (`undefined`; model control mode `none`). Failures are
   * recorded as UNAVAILABLE with their reason, never thrown.
   */
  async loadAll(names?: readonly string[]): Promise<void> {
    const found = await this.scan();
    const wanted = names === undefined || names.includes('*') ? [...found.keys()] : names;
    await Promise.all(
      wanted.map(async (name) => {
        const loc = found.get(name);
        if (!loc) {
          this.#models.set(name, failedModel(name, `model '${name}' is not in any model repository`));
          this.#opts.logger.error({ model: name }, `failed to load '${name}': not found in the model repositories`);
          return;
        }
        await this.load(name, { dir: loc.dir });
      }),
    );
  }

  /**
   * Loads (or reloads) one model atomically: the new model is built beside the serving one and swapped in only
   * when every version it selects is READY; otherwise the serving one stays, and the failure is returned with its
   * reason. A model that was not serving is recorded as UNAVAILABLE.
   */
  async load(
    name: string,
    source: { dir: string; config?: ModelConfig; fingerprint?: string; tempDir?: string },
  ): Promise<Model> {
    if (this.#closed) throw new NereidError('UNAVAILABLE', 'server is shutting down');
    const old = this.#models.get(name);
    const serving = old !== undefined && old.state === 'READY';
    if (!serving) {
      this.#models.set(name, { ...failedModel(name, ''), dir: source.dir, state: 'LOADING' });
    }
    const model = await this.#build(name, source.dir, source.config);
    model.fingerprint = source.fingerprint ?? (await fingerprint(source.dir));
    model.tempDir = source.tempDir;
    const ok = model.state === 'READY' && [...model.versions.values()].every((v) => v.state === 'READY');
    if (ok || !serving) {
      this.#models.set(name, model);
      // The old load retires in the background (its in-flight requests finish); a failure there is only logged.
      const retired = old ? this.#retire(old) : undefined;
      retired?.catch((err: unknown) => this.#opts.logger.error({ err, model: name }, 'retiring the old load failed'));
    } else {
      // Keep serving the old model; report why the new one was refused.
      await this.#retire(model);
      old.reason = `reload failed, still serving the previous load: ${model.reason || describeFailures(model)}`;
      this.#opts.logger.error({ model: name }, old.reason);
    }
    return model;
  }

  /**
   * Unloads a model: new requests fail at once, requests already queued or running finish. Its versions stay
   * listed as UNAVAILABLE "unloaded" (Triton's index), unless `forget` (its folder is gone in poll mode).
   */
  async unload(name: string, opts: { forget?: boolean } = {}): Promise<void> {
    const model = this.#models.get(name);
    if (!model) return;
    if (opts.forget) this.#models.delete(name);
    else {
      const versions = new Map(
        [...model.versions].map(([v, e]) => [
          v,
          { version: v, state: 'UNAVAILABLE' as const, reason: 'unloaded', stats: e.stats },
        ]),
      );
      this.#models.set(name, { ...failedModel(name, 'unloaded'), dir: model.dir, versions });
    }
    await this.#retire(model);
  }

  /** Drains a model's schedulers and releases its instances. */
  async #retire(model: Model): Promise<void> {
    await Promise.all(
      [...model.versions.values()].map(async (v) => {
        if (v.state === 'READY') v.state = 'UNLOADING';
        await v.scheduler?.stop();
        await v.loaded?.close();
        v.state = 'UNAVAILABLE';
        v.reason = 'unloaded';
      }),
    );
    if (model.tempDir) await rm(model.tempDir, { recursive: true, force: true });
  }

  /**
   * Poll mode: rescans the repositories; loads new models, reloads those whose config or files changed, and
   * unloads those whose folder is gone. Returns what it did, for logs and tests.
   */
  async poll(): Promise<{ loaded: string[]; unloaded: string[] }> {
    const found = await this.scan();
    const loaded: string[] = [];
    const unloaded: string[] = [];
    for (const [name, model] of this.#models) {
      if (!found.has(name) && model.dir !== '') {
        await this.unload(name, { forget: true });
        unloaded.push(name);
      }
    }
    for (const [name, loc] of found) {
      const current = this.#models.get(name);
      const fp = await fingerprint(loc.dir);
      if (current && current.fingerprint === fp) continue;
      await this.load(name, { dir: loc.dir, fingerprint: fp });
      loaded.push(name);
    }
    return { loaded, unloaded };
  }

  async #build(name: string, dir: string, configOverride?: ModelConfig): Promise<Model> {
    const model: Model = { ...failedModel(name, ''), dir, state: 'LOADING' };
    const log = this.#opts.logger.child({ model: name });
    const started = process.hrtime.bigint();
    try {
      const versions = await listVersions(dir);
      const files = await filesInVersions(dir, versions);
      const parsed = configOverride ?? (await readConfig(dir));
      const backends = this.#opts.backends.map((b) => b.name);
      let config = normalizeConfig(parsed, name, files, backends);
      const backend = this.#backend(config.backend as string);
      const selected = selectVersions(versions, config.version_policy);
      const missing = (config.version_policy?.specific?.versions ?? []).filter((v) => !versions.includes(v));
      if (selected.length === 0) {
        throw new NereidError(
          'INVALID_ARG',
          versions.length === 0
            ? `model '${name}' has no version folders (expected ${relative(process.cwd(), dir) || dir}/<n>/${config.default_model_filename ?? backend.defaultModelFilename})`
            : `model '${name}': version_policy selects none of the versions present [${versions.join(', ')}]`,
        );
      }
      const backendConfig = this.#opts.backendConfig.get(backend.name) ?? {};
      const fileName = config.default_model_filename ?? backend.defaultModelFilename;
      const latestPath = join(dir, String(selected[selected.length - 1]), fileName);
      await assertExists(latestPath, name);
      const sig = await backend.signature(latestPath, { backendConfig, config });
      config = completeConfig(config, sig, name, {
        autoComplete: this.#opts.autoComplete,
        defaultMaxBatchSize: parsePositiveInt(backendConfig['default-max-batch-size'], 4),
        logger: log,
      });
      const problems = validateModelConfig(config, `${name}/config.pbtxt`, { modelName: name });
      if (problems.length > 0) throw configErrorsToException(problems);
      model.config = Object.freeze(config);
      model.labels = await readLabels(dir, config);
      await Promise.all(selected.map((v) => this.#loadVersion(model, v, join(dir, String(v), fileName), backend)));
      for (const v of missing) {
        model.versions.set(v, {
          version: v,
          state: 'UNAVAILABLE',
          stats: new ModelStats(),
          reason: `version ${v} is listed in version_policy.specific but ${dir}/${v} does not exist`,
        });
      }
      model.state = [...model.versions.values()].some((v) => v.state === 'READY') ? 'READY' : 'UNAVAILABLE';
      if (model.state !== 'READY') model.reason = describeFailures(model);
      const secs = Number(process.hrtime.bigint() - started) / 1e9;
      log.info({ versions: selected, seconds: secs }, `loaded model '${name}'`);
    } catch (err) {
      const e = NereidError.from(err);
      model.state = 'UNAVAILABLE';
      model.reason = e.message;
      log.error({ err: e.code === 'INTERNAL' ? e.cause : undefined }, `failed to load model '${name}': ${e.message}`);
    }
    return model;
  }

  async #loadVersion(model: Model, version: number, modelPath: string, backend: Backend): Promise<void> {
    const entry: ModelVersion = { version, state: 'LOADING', reason: '', stats: new ModelStats() };
    model.versions.set(version, entry);
    const started = process.hrtime.bigint();
    try {
      await assertExists(modelPath, model.name);
      const loaded = await backend.load({
        name: model.name,
        version,
        config: model.config as ModelConfig,
        modelDir: model.dir,
        modelPath,
        backendConfig: this.#opts.backendConfig.get(backend.name) ?? {},
        logger: this.#opts.logger.child({ model: model.name, version }),
      });
      if (this.#closed) {
        await loaded.close();
        throw new NereidError('UNAVAILABLE', 'server is shutting down');
      }
      entry.loaded = loaded;
      entry.scheduler = createScheduler(model.config as ModelConfig, loaded.instances, {
        stats: entry.stats,
        maxBatchSize: model.config?.max_batch_size ?? 0,
        logger: this.#opts.logger.child({ model: model.name, version }),
      });
      entry.state = 'READY';
      entry.loadSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    } catch (err) {
      const e = NereidError.from(err);
      entry.state = 'UNAVAILABLE';
      entry.reason = `version ${version}: ${e.message}`;
    }
  }

  #backend(name: string): Backend {
    const b = this.#opts.backends.find((x) => x.name === name);
    if (!b) throw new NereidError('INVALID_ARG', `backend '${name}' is not available`);
    return b;
  }

  /** Models that failed, with their reasons. */
  failures(): { name: string; reason: string }[] {
    return this.list()
      .filter((m) => m.state !== 'READY')
      .map((m) => ({ name: m.name, reason: m.reason }));
  }

  /** Drains every scheduler and releases every instance; idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all(this.list().map((m) => this.#retire(m)));
  }
}

async function readConfig(dir: string): Promise<ModelConfig> {
  const file = join(dir, 'config.pbtxt');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw err;
  }
  // Errors name the file relative to the repository (`simple/config.pbtxt:7:3: ...`).
  return parseModelConfigOrThrow(text, join(dir.split(/[\\/]/).pop() as string, 'config.pbtxt'));
}

async function filesInVersions(dir: string, versions: number[]): Promise<Set<string>> {
  const names = new Set<string>();
  for (const v of versions) for (const f of await readdir(join(dir, String(v)))) names.add(f);
  return names;
}

async function assertExists(path: string, model: string): Promise<void> {
  try {
    await stat(path);
  } catch {
    throw new NereidError('INVALID_ARG', `model '${model}': model file ${path} not found`);
  }
}

async function readLabels(dir: string, config: ModelConfig): Promise<Map<string, string[]>> {
  const labels = new Map<string, string[]>();
  for (const o of config.output ?? []) {
    if (!o.label_filename) continue;
    const text = await readFile(join(dir, o.label_filename), 'utf8').catch((err: Error) => {
      throw new NereidError(
        'INVALID_ARG',
        `output '${o.name}': cannot read label_filename '${o.label_filename}': ${err.message}`,
      );
    });
    labels.set(
      o.name as string,
      text.split(/\r?\n/).filter((l, i, a) => l !== '' || i < a.length - 1),
    );
  }
  return labels;
}

function parsePositiveInt(s: string | undefined, fallback: number): number {
  if (s === undefined) return fallback;
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0) {
    throw new NereidError(
      'INVALID_ARG',
      `backend-config default-max-batch-size must be a non-negative integer, got '${s}'`,
    );
  }
  return n;
}

function failedModel(name: string, reason: string): Model {
  return { name, dir: '', state: 'UNAVAILABLE', reason, versions: new Map(), labels: new Map(), fingerprint: '' };
}

/** Triton's wording: `version 2 is at UNAVAILABLE state: <why>`. */
function describeFailures(model: Model): string {
  return [...model.versions.values()]
    .filter((v) => v.state !== 'READY')
    .map((v) => `version ${v.version} is at ${v.state} state: ${v.reason.replace(/^version \d+: /, '')}`)
    .join('; ');
}
