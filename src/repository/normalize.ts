import type { Backend } from '../backends/contract.js';
import type { BackendRegistry } from '../backends/registry.js';
import { maxBatchOf, type ModelConfig, type ModelInstanceGroup } from '../config/model-config.js';
import { InvalidArgError, UnavailableError } from '../core/errors.js';

/** Triton's platform name for ensembles. */
export const ENSEMBLE_PLATFORM = 'ensemble';

/**
 * Triton core's part of auto-complete, done whatever the flags say: name, backend/platform from each
 * other or from the files present, default version policy and instance groups.
 * `filesInVersionDirs` lists the names found in the version folders (to sniff `model.onnx` / `model.plan`).
 */
export function normalizeConfig(
  input: ModelConfig,
  modelName: string,
  filesInVersionDirs: ReadonlySet<string>,
  registry: BackendRegistry,
): ModelConfig {
  const config: ModelConfig = structuredClone(input);
  if (config.name === undefined || config.name === '') config.name = modelName;
  else if (config.name !== modelName) {
    throw new InvalidArgError(
      `model '${modelName}': config.pbtxt says name: "${config.name}", but the model's folder is '${modelName}'; they must match`,
    );
  }
  if (config.platform === ENSEMBLE_PLATFORM && !config.backend) {
    // An ensemble has no backend and no instances of its own: its steps run on their models' instances.
    config.version_policy ??= { latest: { num_versions: 1 } };
    config.max_batch_size ??= 0;
    if (config.max_batch_size < 0) {
      throw new InvalidArgError(`model '${modelName}': max_batch_size must be >= 0, got ${config.max_batch_size}`);
    }
    return config;
  }
  if (!config.backend && config.platform) {
    const b = registry.byPlatform(config.platform);
    if (!b) {
      throw new InvalidArgError(
        `model '${modelName}': platform '${config.platform}' is not served by any backend of Nereid; available: ${registry.all.flatMap((x) => x.platforms).join(', ')}`,
      );
    }
    config.backend = b.name;
  }
  if (!config.backend && !config.platform) {
    const candidates = registry.sniff(filesInVersionDirs, config.default_model_filename);
    if (candidates.length === 1) config.backend = candidates[0].name;
  }
  if (!config.backend) {
    throw new InvalidArgError(
      `model '${modelName}': cannot tell which backend runs it: set backend (or platform) in config.pbtxt, or name the file after its backend's default (${registry.all
        .filter((b) => b.defaultModelFilename !== '')
        .map((b) => `${b.defaultModelFilename}: ${b.name}`)
        .join(', ')})`,
    );
  }
  const backend = registry.get(config.backend);
  if (!backend) {
    throw new InvalidArgError(
      `model '${modelName}': backend '${config.backend}' is not available in Nereid; available: ${registry.names.join(', ')}`,
    );
  }
  const platform = backend.platforms[0];
  if (config.platform && platform && !backend.platforms.includes(config.platform)) {
    throw new InvalidArgError(
      `model '${modelName}': platform '${config.platform}' does not match backend '${config.backend}' (expected platform '${platform}')`,
    );
  }
  if (!config.platform && platform) config.platform = platform;
  if (!backend.kinds.includes('KIND_CPU') && registry.gpus.length === 0) {
    // Said first, before any instance kind (KIND_AUTO would become a KIND_CPU the user never wrote) and before the
    // backend probes its model file or offers to install its runtime: nothing else can make such a model load here.
    throw new UnavailableError(
      `model '${modelName}': no GPU on this machine (no NVIDIA driver or CUDA device found; 'nereid gpu check' says what the server sees), and the '${backend.name}' backend runs on GPUs only`,
    );
  }
  config.version_policy ??= { latest: { num_versions: 1 } };
  if (maxBatchOf(config) < 0) {
    throw new InvalidArgError(`model '${modelName}': max_batch_size must be >= 0, got ${config.max_batch_size}`);
  }
  config.max_batch_size ??= 0;
  config.instance_group = normalizeInstanceGroups(config.instance_group, modelName, backend, registry);
  return config;
}

/**
 * Triton's defaults: no group → one KIND_AUTO group; KIND_AUTO becomes KIND_GPU when the backend can use a GPU
 * and the machine has one, else KIND_CPU; count defaults to 1, or the backend's CPU default (2 for
 * onnxruntime); names `<model>_<index>`.
 */
function normalizeInstanceGroups(
  groups: ModelInstanceGroup[] | undefined,
  modelName: string,
  backend: Backend,
  registry: BackendRegistry,
): ModelInstanceGroup[] {
  const list = groups && groups.length > 0 ? groups : [{}];
  return list.map((g, i) => {
    const kind = registry.resolveKind(g.kind, backend);
    const defaultCount = kind === 'KIND_CPU' ? (backend.defaultCpuInstanceCount ?? 1) : 1;
    const count = g.count ?? defaultCount;
    if (!Number.isInteger(count) || count < 1) {
      throw new InvalidArgError(`model '${modelName}': instance_group ${i} has count ${count}; it must be >= 1`);
    }
    return { ...g, name: g.name || `${modelName}_${i}`, kind, count };
  });
}
