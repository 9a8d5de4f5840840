import type { ModelHandle } from '../backends/contract.js';
import type { InstancePool } from '../backends/runtime/pool.js';
import type { ModelStats } from '../core/stats.js';
import type { Scheduler } from '../scheduler/scheduler.js';
import type { ModelSpec } from './spec.js';

/** Triton's model states. */
export type ModelState = 'UNKNOWN' | 'READY' | 'UNAVAILABLE' | 'LOADING' | 'UNLOADING';

/** One loaded (or failed) version of a model. Its state changes only through its model's lifecycle. */
export interface ModelVersion {
  readonly version: number;
  state: ModelState;
  reason: string;
  handle?: ModelHandle;
  pool?: InstancePool;
  scheduler?: Scheduler;
  /** Statistics of this version (statistics extension, metrics). */
  stats: ModelStats;
  /** Seconds its load took (`nv_model_load_duration_secs`). */
  loadSeconds?: number;
}

/** A model of the repository: its resolved spec, its versions, and what it was loaded from. */
export interface Model {
  readonly name: string;
  readonly dir: string;
  /** Resolved once at load; undefined when the config itself failed. */
  spec?: ModelSpec;
  /** Model-level failure (config syntax, backend), reported as the state of every version. */
  state: ModelState;
  reason: string;
  versions: Map<number, ModelVersion>;
  /** What the model was loaded from (config and file sizes/times), to tell in poll mode whether it changed. */
  fingerprint: string;
  /** Folder made for a load request's file overrides; removed when the model is unloaded or replaced. */
  tempDir?: string;
}

/** The highest READY version, Triton's choice when a request names none. */
export function latestReady(model: Model): ModelVersion | undefined {
  let best: ModelVersion | undefined;
  for (const v of model.versions.values()) {
    if (v.state === 'READY' && (!best || v.version > best.version)) best = v;
  }
  return best;
}

export function emptyModel(name: string, dir: string, state: ModelState, reason: string): Model {
  return { name, dir, state, reason, versions: new Map(), fingerprint: '' };
}

/** An unloaded model keeps its versions listed as UNAVAILABLE "unloaded" (Triton's index), with their stats. */
export function unloadedModel(old: Model): Model {
  const versions = new Map(
    [...old.versions].map(([v, e]): [number, ModelVersion] => [
      v,
      { version: v, state: 'UNAVAILABLE', reason: 'unloaded', stats: e.stats },
    ]),
  );
  return { ...emptyModel(old.name, old.dir, 'UNAVAILABLE', 'unloaded'), versions };
}

/**
 * Why the repository has this model but could not load it (its config, backend or every version failed), or
 * undefined: loaded, loading, unloaded, or a name with no folder in any repository (those are "not found").
 */
export function loadFailure(model: Model): string | undefined {
  if (model.spec !== undefined || model.state !== 'UNAVAILABLE' || model.dir === '') return undefined;
  if (model.reason === '' || model.reason === 'unloaded') return undefined;
  return model.reason;
}

/** Triton's wording: `version 2 is at UNAVAILABLE state: <why>`. */
export function describeFailures(model: Model): string {
  return [...model.versions.values()]
    .filter((v) => v.state !== 'READY')
    .map((v) => `version ${v.version} is at ${v.state} state: ${v.reason.replace(/^version \d+: /, '')}`)
    .join('; ');
}
