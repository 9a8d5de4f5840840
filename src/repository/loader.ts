import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Backend, BackendConfig } from '../backends/contract.js';
import type { BackendRegistry } from '../backends/registry.js';
import { checkModelParameters, logModelParameters } from '../backends/settings.js';
import type { RateLimiter } from '../backends/runtime/rate-limiter.js';
import { InstancePool, type PoolHealth } from '../backends/runtime/pool.js';
import {
  configErrorsToException,
  finalizeConfig,
  parseModelConfigOrThrow,
  validateModelConfig,
} from '../config/index.js';
import { maxBatchOf, type ModelConfig } from '../config/model-config.js';
import { CancelledError, InvalidArgError, NereidError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { ModelStats } from '../core/stats.js';
import { EnsembleScheduler, type StepRunner } from '../scheduler/ensemble/scheduler.js';
import { createScheduler, loadSequenceSpec, MAX_BACKLOG_PARAM } from '../scheduler/index.js';
import { loadWarmupSamples, runWarmup, type WarmupSample } from '../scheduler/warmup.js';
import { prepareEnsemble, type EnsembleDeps } from './ensemble.js';
import { describeFailures, emptyModel, type Model, type ModelVersion } from './model.js';
import type { LoadSlots } from './load-slots.js';
import { checkModelLayout } from './layout.js';
import { ENSEMBLE_PLATFORM, normalizeConfig } from './normalize.js';
import { listVersions, selectVersions } from './scan.js';
import { resolveSpec, type ModelSpec } from './spec.js';

/**
 * Builds one model from its folder: config (file or override) → normalize → the backend's auto-complete →
 * validation → resolved spec → each selected version loaded (its model handle, its instance pool, its
 * scheduler). Never throws: a failure is the model's (or a version's) UNAVAILABLE state with the reason.
 * Called only by the model's lifecycle, one operation at a time.
 */

/** What checkSections knows of an ensemble: no backend, only the sections every model may have. */
const ENSEMBLE_DESCRIPTOR = Object.freeze({ name: 'ensemble', sections: [] as const });

export interface LoaderDeps extends EnsembleDeps {
  /** The server has a response cache (`--cache-config`): versions of models that enable it use it. */
  responseCache: boolean;
  /** Runs an ensemble step through the server (the facade's own request path). */
  runStep: StepRunner;
  registry: BackendRegistry;
  /** `--backend-config` values per backend name. */
  backendConfig: ReadonlyMap<string, BackendConfig>;
  autoComplete: boolean;
  logger: Logger;
  /** `--model-load-thread-count`: the loads that may run at once (shared by every model of the repository). */
  loadSlots: LoadSlots;
  /** `--model-config-name`: `configs/<name>.pbtxt` is a model's config where it exists (else config.pbtxt). */
  configName?: string;
  /** The server's rate limiter (`--rate-limit=execution_count`); none = off. */
  limiter?: RateLimiter;
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
  const release = await deps.loadSlots.acquire();
  const started = process.hrtime.bigint();
  // `load` marks the start and end of a load for readers of the log (the terminal's progress line, log pipelines).
  log.info({ load: 'begin' }, `loading model '${name}'`);
  try {
    const versions = await listVersions(dir);
    const files = await filesInVersions(dir, versions);
    const parsed = override ?? (await readConfig(dir, deps.configName));
    await checkModelLayout(name, dir, versions, files, parsed, deps.registry);
    const config = normalizeConfig(parsed, name, files, deps.registry);
    const ensemble = config.platform === ENSEMBLE_PLATFORM && !config.backend;
    const backend = ensemble ? undefined : (deps.registry.get(config.backend as string) as Backend);
    const selected = selectVersions(versions, config.version_policy);
    const missing = (config.version_policy?.specific?.versions ?? []).filter((v) => !versions.includes(v));
    if (selected.length === 0) {
      const fileName = backend ? (config.default_model_filename ?? backend.defaultModelFilename) : '';
      throw new NereidError(
        'INVALID_ARG',
        versions.length === 0
          ? `model '${name}' has no version folders (expected ${relative(process.cwd(), dir) || dir}/<n>/${fileName})`
          : `model '${name}': version_policy selects none of the versions present [${versions.join(', ')}]`,
      );
    }
    if (config.response_cache?.enable && config.sequence_batching) {
      throw new InvalidArgError(
        `Response Cache does not currently support model ${name} with sequence batching scheduler. Please disable the response cache.`,
      );
    }
    if (backend === undefined) {
      release();
      await loadEnsemble(model, config, selected, deps);
    } else await loadBackendModel(model, config, backend, selected, deps, log, signal);
    if (config.response_cache?.enable) {
      if (deps.responseCache) for (const v of model.versions.values()) v.stats.enableCache();
      else {
        log.warn(
          `model '${name}' sets response_cache { enable: true }, but the server has no response cache; start it with --cache-config=local,size=<bytes>`,
        );
      }
    }
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
  } finally {
    release();
  }
  return model;
}

/** An ensemble: its graph checked against its composing models (loaded first); one scheduler per version. */
async function loadEnsemble(model: Model, config: ModelConfig, selected: number[], deps: LoaderDeps): Promise<void> {
  const name = model.name;
  const problems = validateModelConfig(config, `${name}/config.pbtxt`, { modelName: name });
  if (problems.length > 0) throw configErrorsToException(problems);
  deps.registry.checkSections(config, ENSEMBLE_DESCRIPTOR, name);
  const graph = await prepareEnsemble(config, deps);
  model.spec = resolveSpec(finalizeConfig(config, name), {
    labels: await readLabels(model.dir, config),
    ensemble: graph,
  });
  for (const v of selected) {
    model.versions.set(v, {
      version: v,
      state: 'READY',
      reason: '',
      stats: new ModelStats(),
      scheduler: new EnsembleScheduler(graph, deps.runStep),
      loadSeconds: 0,
    });
  }
}

/** A model run by a backend: auto-complete, checks, then each selected version's handle, instances, scheduler. */
async function loadBackendModel(
  model: Model,
  normalized: ModelConfig,
  backend: Backend,
  selected: number[],
  deps: LoaderDeps,
  log: Logger,
  signal: AbortSignal,
): Promise<void> {
  const { name, dir } = model;
  const backendConfig = deps.backendConfig.get(backend.name) ?? {};
  const latestPath = await modelFileIn(join(dir, String(selected[selected.length - 1])), normalized, backend);
  await assertExists(latestPath, name);
  const completed = await backend.autoComplete(normalized, {
    modelName: name,
    modelPath: latestPath,
    backendConfig,
    autoComplete: deps.autoComplete,
    logger: log,
    signal,
  });
  const problems = validateModelConfig(completed, `${name}/config.pbtxt`, { modelName: name });
  if (problems.length > 0) throw configErrorsToException(problems);
  const config = finalizeConfig(completed, name);
  deps.registry.checkSections(config, backend, name);
  // The sequence batcher reads its parameter for every backend.
  logModelParameters(checkModelParameters(config, backend, name, [MAX_BACKLOG_PARAM]), log);
  const specs = deps.registry.expandInstances(config, name, backend);
  model.spec = resolveSpec(config, {
    maxBatchSizeAutoCompleted: maxBatchOf(normalized) === 0 && config.max_batch_size > 0,
    labels: await readLabels(dir, config),
    sequence: config.sequence_batching ? await loadSequenceSpec(config, dir) : undefined,
  });
  const plan: VersionPlan = {
    spec: model.spec,
    backend,
    backendConfig,
    instances: specs,
    warmup: await loadWarmupSamples(config, dir),
  };
  await Promise.all(
    selected.map(async (v) => {
      const entry: ModelVersion = { version: v, state: 'LOADING', reason: '', stats: new ModelStats() };
      model.versions.set(v, entry);
      await loadVersion(model, entry, plan, deps, signal);
    }),
  );
}

/** What every version of a backend model is loaded from (resolved once per model). */
interface VersionPlan {
  spec: ModelSpec;
  backend: Backend;
  backendConfig: BackendConfig;
  instances: Parameters<typeof InstancePool.create>[1];
  warmup: readonly WarmupSample[];
}

async function loadVersion(
  model: Model,
  entry: ModelVersion,
  plan: VersionPlan,
  deps: LoaderDeps,
  signal: AbortSignal,
): Promise<void> {
  const { spec, backend } = plan;
  const started = process.hrtime.bigint();
  const logger = deps.logger.child({ model: model.name, version: entry.version });
  try {
    const modelPath = await modelFileIn(join(model.dir, String(entry.version)), spec.config, backend);
    await assertExists(modelPath, model.name);
    if (signal.aborted) throw new CancelledError(`load of '${model.name}' was cancelled`);
    entry.handle = await backend.load(
      {
        name: model.name,
        version: entry.version,
        config: spec.config,
        modelDir: model.dir,
        modelPath,
        backendConfig: plan.backendConfig,
        logLevel: deps.logger.level,
        logger,
      },
      signal,
    );
    entry.pool = await InstancePool.create(entry.handle, plan.instances, { logger, limiter: deps.limiter }, signal);
    // Warm-up comes before READY: no request reaches a cold instance.
    if (plan.warmup.length > 0) {
      const t = process.hrtime.bigint();
      await runWarmup(entry.pool.instances, plan.warmup, spec.outputNames, signal);
      logger.info(
        { samples: plan.warmup.map((w) => w.name), seconds: Number(process.hrtime.bigint() - t) / 1e9 },
        `warmed up model '${model.name}' version ${entry.version}`,
      );
    }
    entry.pool.on({ health: (h) => deps.onHealth(model, entry, h) });
    entry.scheduler = createScheduler(
      spec.config,
      { stats: entry.stats, maxBatchSize: spec.maxBatchSize, pool: entry.pool, logger },
      { sequence: spec.sequence },
    );
    entry.state = 'READY';
    entry.loadSeconds = Number(process.hrtime.bigint() - started) / 1e9;
  } catch (err) {
    await entry.pool?.destroy();
    entry.pool = undefined;
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

async function readConfig(dir: string, configName: string | undefined): Promise<ModelConfig> {
  const custom = configName === undefined ? undefined : join('configs', `${configName}.pbtxt`);
  const name = custom !== undefined && (await stat(join(dir, custom)).catch(() => undefined)) ? custom : 'config.pbtxt';
  const file = join(dir, name);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw err;
  }
  // Errors name the file relative to the repository (`simple/config.pbtxt:7:3: ...`).
  return parseModelConfigOrThrow(text, join(dir.split(/[\\/]/).pop() as string, name));
}

async function filesInVersions(dir: string, versions: number[]): Promise<Set<string>> {
  const names = new Set<string>();
  for (const v of versions) for (const f of await readdir(join(dir, String(v)))) names.add(f);
  return names;
}

/** The model file of a version folder: the config's or the backend's default, else an alternate that is there. */
async function modelFileIn(versionDir: string, config: ModelConfig, backend: Backend): Promise<string> {
  const named = config.default_model_filename;
  const first = join(versionDir, named ?? backend.defaultModelFilename);
  if (named !== undefined || (await exists(first))) return first;
  for (const alt of backend.alternateModelFilenames ?? []) {
    if (await exists(join(versionDir, alt))) return join(versionDir, alt);
  }
  return first;
}

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );

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
