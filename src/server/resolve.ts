import type { ModelMetadata, TensorMetadata } from './api.js';
import { NotFoundError, UnavailableError } from '../core/errors.js';
import type { ModelRepository } from '../repository/manager.js';
import { latestReady, loadFailure, type Model, type ModelVersion } from '../repository/model.js';
import type { ModelSpec } from '../repository/spec.js';
import type { PathRedactor } from './redact.js';
import { Target } from './target.js';
import { parseVersionString } from './version-string.js';

/**
 * The one model lookup of a request: its model, the version asked for (or the latest ready one) and the spec, with
 * Triton's answers for what cannot be served (unknown model or version: NOT_FOUND; known but not ready now, or
 * failed to load: UNAVAILABLE with the reason, redacted of server paths).
 */
export function resolveTarget(repo: ModelRepository, paths: PathRedactor, name: string, version?: string): Target {
  // Triton reads the version string before it looks the model up (HandleInfer, ModelMetadata...).
  const wanted = parseVersionString(version);
  const model = repo.get(name);
  const failure = model && loadFailure(model);
  // The repository has the model but its load failed: UNAVAILABLE with the reason (by latest or by version),
  // the rule of a version that cannot serve now; "not found" would send the user looking for a typo.
  if (failure !== undefined) throw new UnavailableError(`model '${name}' failed to load: ${paths.redact(failure)}`);
  if (!model || !model.spec) throw new NotFoundError(`Request for unknown model: '${name}' is not found`);
  let v: ModelVersion | undefined;
  if (wanted !== undefined) {
    v = model.versions.get(wanted);
    if (!v) throw new NotFoundError(`Request for unknown model: '${name}' version ${version} is not found`);
    if (v.state !== 'READY') {
      const why = v.reason ? `: ${paths.redact(v.reason)}` : '';
      throw new UnavailableError(`Request for unknown model: '${name}' version ${version} is not at ready state${why}`);
    }
  } else {
    v = latestReady(model);
    // The repository has this model (its config resolved) but no version serves now (an instance restarting,
    // a composing model missing, a version that failed): UNAVAILABLE with the reason, never "not found".
    if (!v) {
      const why = model.reason ? paths.redact(model.reason) : 'no version is ready';
      throw new UnavailableError(`model '${name}' is not available now: ${why}`);
    }
  }
  return new Target(model, v, model.spec);
}

/** A resolved model's metadata (KServe's model metadata response): READY versions, tensors with full dims. */
export function modelMetadataOf(model: Model, spec: ModelSpec): ModelMetadata {
  const meta = (t: {
    name: string;
    datatype: TensorMetadata['datatype'];
    fullDims: readonly number[];
  }): TensorMetadata => ({
    name: t.name,
    datatype: t.datatype,
    shape: [...t.fullDims],
  });
  const versions = [...model.versions.values()]
    .filter((v) => v.state === 'READY')
    .map((v) => v.version)
    .sort((a, b) => a - b)
    .map(String);
  return {
    name: model.name,
    versions,
    platform: spec.platform,
    inputs: [...spec.inputs.values()].map(meta),
    outputs: [...spec.outputs.values()].map(meta),
  };
}
