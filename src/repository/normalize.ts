import type { ModelConfig, ModelInstanceGroup } from '../config/model-config.js';
import { InvalidArgError } from '../core/errors.js';

/** Backend names ↔ platform names Nereid knows. */
export const PLATFORM_OF_BACKEND: Readonly<Record<string, string>> = Object.freeze({
  onnxruntime: 'onnxruntime_onnx',
  tensorrt: 'tensorrt_plan',
});
const BACKEND_OF_PLATFORM: Readonly<Record<string, string>> = Object.freeze(
  Object.fromEntries(Object.entries(PLATFORM_OF_BACKEND).map(([b, p]) => [p, b])),
);

/** Default model file name of each backend, used to sniff the backend when the config names none. */
export const DEFAULT_FILENAMES: Readonly<Record<string, string>> = Object.freeze({
  onnxruntime: 'model.onnx',
  tensorrt: 'model.plan',
});

/**
 * Triton core's part of auto-complete, done whatever the flags say: name, backend/platform from each
 * other or from the files present, default version policy and instance groups.
 * `filesInVersionDirs` lists the names found in the version folders (to sniff `model.onnx` / `model.plan`).
 */
export function normalizeConfig(
  input: ModelConfig,
  modelName: string,
  filesInVersionDirs: ReadonlySet<string>,
  knownBackends: readonly string[],
): ModelConfig {
  const config: ModelConfig = structuredClone(input);
  if (config.name === undefined || config.name === '') config.name = modelName;
  else if (config.name !== modelName) {
    throw new InvalidArgError(
      `model '${modelName}': config.pbtxt says name: "${config.name}", but the model's folder is '${modelName}'; they must match`,
    );
  }
  if (!config.backend && config.platform) config.backend = BACKEND_OF_PLATFORM[config.platform];
  if (!config.backend && !config.platform) {
    const candidates = Object.entries(DEFAULT_FILENAMES).filter(([, f]) =>
      filesInVersionDirs.has(config.default_model_filename ?? f),
    );
    if (candidates.length === 1) config.backend = candidates[0][0];
  }
  if (!config.backend) {
    throw new InvalidArgError(
      `model '${modelName}': cannot tell which backend runs it: set backend: "onnxruntime" (or platform: "onnxruntime_onnx") in config.pbtxt, or name the file model.onnx`,
    );
  }
  if (!knownBackends.includes(config.backend)) {
    throw new InvalidArgError(
      `model '${modelName}': backend '${config.backend}' is not available in Nereid; available: ${knownBackends.join(', ')}`,
    );
  }
  const platform = PLATFORM_OF_BACKEND[config.backend];
  if (config.platform && platform && config.platform !== platform) {
    throw new InvalidArgError(
      `model '${modelName}': platform '${config.platform}' does not match backend '${config.backend}' (expected platform '${platform}')`,
    );
  }
  if (!config.platform && platform) config.platform = platform;
  config.version_policy ??= { latest: { num_versions: 1 } };
  if ((config.max_batch_size ?? 0) < 0) {
    throw new InvalidArgError(`model '${modelName}': max_batch_size must be >= 0, got ${config.max_batch_size}`);
  }
  config.max_batch_size ??= 0;
  config.instance_group = normalizeInstanceGroups(config.instance_group, modelName, config.backend);
  return config;
}

/**
 * Triton's defaults: no group → one KIND_AUTO group; KIND_AUTO becomes KIND_CPU on a machine without
 * GPUs; count defaults to 1, but 2 for a KIND_CPU onnxruntime group; names `<model>_<index>`.
 */
function normalizeInstanceGroups(
  groups: ModelInstanceGroup[] | undefined,
  modelName: string,
  backend: string,
): ModelInstanceGroup[] {
  const list = groups && groups.length > 0 ? groups : [{}];
  return list.map((g, i) => {
    const kind = !g.kind || g.kind === 'KIND_AUTO' ? 'KIND_CPU' : g.kind;
    const defaultCount = kind === 'KIND_CPU' && backend === 'onnxruntime' ? 2 : 1;
    const count = g.count ?? defaultCount;
    if (!Number.isInteger(count) || count < 1) {
      throw new InvalidArgError(`model '${modelName}': instance_group ${i} has count ${count}; it must be >= 1`);
    }
    return { ...g, name: g.name || `${modelName}_${i}`, kind, count };
  });
}
