import { readdir, readFile, stat } from 'node:fs/promises';
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
import { listVersions, scanRepositories, selectVersions } from './scan.js';

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

  /** Loads every model found (model control mode `none`). Failures are recorded, never thrown. */
  async loadAll(): Promise<void> {
    const { models, duplicates } = await scanRepositories(this.#opts.repositories);
    for (const [name, repos] of duplicates) {
      const model: Model = {
        name,
        dir: '',
        state: 'UNAVAILABLE',
        reason: `model '${name}' appears in more than one repository: ${repos.join(', ')}`,
        versions: new Map(),
        labels: new Map(),
      };
      this.#models.set(name, model);
      this.#opts.logger.error({ model: name }, model.reason);
    }
    await Promise.all(models.map((m) => this.#load(m.name, m.dir)));
  }

  async #load(name: string, dir: string): Promise<Model> {
    const model: Model = { name, dir, state: 'LOADING', reason: '', versions: new Map(), labels: new Map() };
    this.#models.set(name, model);
    const log = this.#opts.logger.child({ model: name });
    const started = process.hrtime.bigint();
    try {
      const versions = await listVersions(dir);
      const files = await filesInVersions(dir, versions);
      const parsed = await readConfig(dir);
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
      if (model.state !== 'READY') {
        model.reason = [...model.versions.values()].map((v) => v.reason).join('; ');
      }
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
    const versions = this.list().flatMap((m) => [...m.versions.values()]);
    await Promise.all(
      versions.map(async (v) => {
        v.state = 'UNLOADING';
        await v.scheduler?.stop();
        await v.loaded?.close();
        v.state = 'UNAVAILABLE';
        v.reason = 'unloaded';
      }),
    );
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
