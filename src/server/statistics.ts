import type { ModelStats } from '../core/stats.js';
import { NotFoundError } from '../core/errors.js';
import { parseVersionString } from './version-string.js';
import type { ModelRepository } from '../repository/manager.js';
import type { ModelIndexEntry, ModelStatistics } from './api.js';

const copy = (d: { count: number; ns: number }): { count: number; ns: number } => ({ count: d.count, ns: d.ns });

/** A version's statistics in Triton's statistics-extension shape. */
export function toModelStatistics(name: string, version: number, s: ModelStats): ModelStatistics {
  return {
    name,
    version: String(version),
    last_inference: s.lastInference,
    inference_count: s.inferenceCount,
    execution_count: s.executionCount,
    inference_stats: {
      success: copy(s.success),
      fail: copy(s.fail),
      queue: copy(s.queue),
      compute_input: copy(s.computeInput),
      compute_infer: copy(s.computeInfer),
      compute_output: copy(s.computeOutput),
      // Zeros when the version has no response cache, as Triton reports them.
      cache_hit: copy(s.cache?.hit ?? { count: 0, ns: 0 }),
      cache_miss: copy(s.cache?.miss ?? { count: 0, ns: 0 }),
    },
    response_stats: {},
    batch_stats: [...s.batches.values()]
      .sort((a, b) => a.batch_size - b.batch_size)
      .map((b) => ({
        batch_size: b.batch_size,
        compute_input: copy(b.compute_input),
        compute_infer: copy(b.compute_infer),
        compute_output: copy(b.compute_output),
      })),
    memory_usage: [],
  };
}

/**
 * The statistics extension's answer: every ready version of every model, of one model, or one version of it.
 * Unknown model or version → NOT_FOUND.
 */
export function collectStatistics(repo: ModelRepository, name?: string, version?: string): ModelStatistics[] {
  const wanted = parseVersionString(version);
  const models = name ? [repo.get(name)] : repo.list();
  const out: ModelStatistics[] = [];
  for (const m of models) {
    if (!m) throw new NotFoundError(`requested model '${name}' is not found`);
    let versions = [...m.versions.values()].filter((v) => v.state === 'READY');
    if (wanted !== undefined) {
      versions = versions.filter((v) => v.version === wanted);
      if (versions.length === 0) throw new NotFoundError(`requested model '${name}' version ${version} is not found`);
    } else if (name && versions.length === 0) {
      throw new NotFoundError(`requested model '${name}' has no available versions`);
    }
    for (const v of versions.sort((a, b) => a.version - b.version))
      out.push(toModelStatistics(m.name, v.version, v.stats));
  }
  return out;
}

/**
 * The repository index: loaded models by version with state and reason, and models found in the repositories but
 * never loaded (explicit mode) by name only. `ready` keeps the READY rows.
 */
export function repositoryIndexRows(repo: ModelRepository, ready: boolean): ModelIndexEntry[] {
  const rows: ModelIndexEntry[] = [];
  const loaded = new Set(repo.list().map((m) => m.name));
  for (const name of repo.found().keys()) {
    if (!loaded.has(name)) rows.push({ name, version: '', state: '', reason: '' });
  }
  for (const m of repo.list()) {
    if (m.versions.size === 0) {
      rows.push({ name: m.name, version: '', state: m.state, reason: m.reason });
      continue;
    }
    for (const v of [...m.versions.values()].sort((a, b) => a.version - b.version)) {
      rows.push({ name: m.name, version: String(v.version), state: v.state, reason: v.reason });
    }
  }
  rows.sort((a, b) => a.name.localeCompare(b.name) || Number(a.version) - Number(b.version));
  return ready ? rows.filter((r) => r.state === 'READY') : rows;
}
