import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Backend, BackendConfig } from '../backends/contract.js';
import type { BackendRegistry } from '../backends/registry.js';
import { InstancePool, type PoolHealth } from '../backends/runtime/pool.js';
import { configErrorsToException, parseModelConfigOrThrow, validateModelConfig } from '../config/index.js';
import type { ModelConfig } from '../config/model-config.js';
import { CancelledError, NereidError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { ModelStats } from '../core/stats.js';
import { createScheduler } from '../scheduler/index.js';
import { describeFailures, emptyModel, type Model, type ModelVersion } from './model.js';
import { normalizeConfig } from './normalize.js';
import { listVersions, selectVersions } from './scan.js';
import { resolveSpec, type ModelSpec } from './spec.js';

/**
 * Builds one model from its folder: config (file or override) → normalize → the backend's auto-complete →
 * validation → resolved spec → each selected version loaded (its model handle, its instance pool, its
 * scheduler). Never throws: a failure is the model's (or a version's) UNAVAILABLE state with the reason.
 * Called only by the model's lifecycle, one operation at a time.
 */

export interface LoaderDeps {
  registry: BackendRegistry;
  /** `--backend-config` values per backend name. */
  backendConfig: ReadonlyMap<string, BackendConfig>;
  autoComplete: boolean;
  logger: Logger;
  /** Instance health changes of a version (the lifecycle turns them into states). */
  onHealth(model: Model, version: ModelVersion, health: PoolHealth): void;
}

export async function buildModel(
  name: string,
  dir: string,
  override: ModelConfig | undefined,
  deps: LoaderDeps,
  signal: AbortSignal,
): Promise<Model> {
  const model = emptyModel(name, dir, 'LOADING', '');
  const log = deps.logger.child({ model: name });
  const started = process.hrtime.bigint();
  // `load` marks the start and end of a load for readers of the log (the terminal's progress line, log pipelines).
  log.info({ load: 'begin' }, `loading model '${name}'`);
  try {
    const versions = await listVersions(dir);
    const files = await filesInVersions(dir, versions);
    const parsed = override ?? (await readConfig(dir));
    let config = normalizeConfig(parsed, name, files, deps.registry);
    const backend = deps.registry.get(config.backend as string) as Backend;
    const selected = selectVersions(versions, config.version_policy);
    const missing = (config.version_policy?.specific?.versions ?? []).filter((v) => !versions.includes(v));
    const fileName = config.default_model_filename ?? backend.defaultModelFilename;
    if (selected.length === 0) {
      throw new NereidError(
        'INVALID_ARG',
        versions.length === 0
          ? `model '${name}' has no version folders (expected ${relative(process.cwd(), dir) || dir}/<n>/${fileName})`
          : `model '${name}': version_policy selects none of the versions present [${versions.join(', ')}]`,
      );
    }
    const backendConfig = deps.backendConfig.get(backend.name) ?? {};
    const latestPath = join(dir, String(selected[selected.length - 1]), fileName);
    await assertExists(latestPath, name);
    config = await backend.autoComplete(config, {
      modelName: name,
      modelPath: latestPath,
      backendConfig,
      autoComplete: deps.autoComplete,
      logger: log,
      signal,
    });
    const problems = validateModelConfig(config, `${name}/config.pbtxt`, { modelName: name });
    if (problems.length > 0) throw configErrorsToException(problems);
    deps.registry.checkSections(config, backend, name);
    const specs = deps.registry.expandInstances(config, name, backend);
    model.spec = resolveSpec(config, await readLabels(dir, config));
    const spec = model.spec;
    await Promise.all(
      selected.map(async (v) => {
        const entry: ModelVersion = { version: v, state: 'LOADING', reason: '', stats: new ModelStats() };
        model.versions.set(v, entry);
        await loadVersion(model, entry, spec, backend, backendConfig, specs, deps, signal);
      }),
    );
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
    if (model.state === 'READY')
      log.info({ load: 'ready', versions: selected, seconds: secs }, `loaded model '${name}'`);
    else log.error({ load: 'failed' }, `failed to load model '${name}': ${model.reason}`);
  } catch (err) {
    const e = NereidError.from(err);
    model.state = 'UNAVAILABLE';
    model.reason = e.message;
    log.error(
      { load: 'failed', err: e.code === 'INTERNAL' ? e.cause : undefined },
      `failed to load model '${name}': ${e.message}`,
    );
  }
  return model;
}

async function loadVersion(
  model: Model,
  entry: ModelVersion,
  spec: ModelSpec,
  backend: Backend,
  backendConfig: BackendConfig,
  specs: Parameters<typeof InstancePool.create>[1],
  deps: LoaderDeps,
  signal: AbortSignal,
): Promise<void> {
  const started = process.hrtime.bigint();
  const logger = deps.logger.child({ model: model.name, version: entry.version });
  const fileName = spec.config.default_model_filename ?? backend.defaultModelFilename;
  try {
    const modelPath = join(model.dir, String(entry.version), fileName);
    await assertExists(modelPath, model.name);
    if (signal.aborted) throw new CancelledError(`load of '${model.name}' was cancelled`);
    entry.handle = await backend.load(
      {
        name: model.name,
        version: entry.version,
        config: spec.config as ModelConfig,
        modelDir: model.dir,
        modelPath,
        backendConfig,
        logLevel: deps.logger.level,
        logger,
      },
      signal,
    );
    entry.pool = await InstancePool.create(entry.handle, specs, { logger }, signal);
    entry.pool.on({ health: (h) => deps.onHealth(model, entry, h) });
    entry.scheduler = createScheduler(spec.config as ModelConfig, {
      stats: entry.stats,
      maxBatchSize: spec.maxBatchSize,
      pool: entry.pool,
      logger,
    });
    entry.state = 'READY';
    entry.loadSeconds = Number(process.hrtime.bigint() - started) / 1e9;
  } catch (err) {
    await entry.handle?.unload().catch(() => undefined);
    entry.handle = undefined;
    const e = NereidError.from(err);
    entry.state = 'UNAVAILABLE';
    entry.reason = `version ${entry.version}: ${e.message}`;
  }
}

/** Drains a model's schedulers, destroys its instances and unloads its versions. */
export async function retireModel(model: Model): Promise<void> {
  await Promise.all(
    [...model.versions.values()].map(async (v) => {
      if (v.state === 'READY') v.state = 'UNLOADING';
      await v.scheduler?.stop();
      await v.pool?.destroy();
      await v.handle?.unload().catch(() => undefined);
      v.state = 'UNAVAILABLE';
      v.reason = 'unloaded';
    }),
  );
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
