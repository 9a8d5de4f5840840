import type { LoadedModel } from '../backends/backend.js';
import type { ModelConfig } from '../config/model-config.js';
import type { ModelStats } from '../core/stats.js';
import type { Scheduler } from '../scheduler/scheduler.js';

/** Triton's model states. */
export type ModelState = 'UNKNOWN' | 'READY' | 'UNAVAILABLE' | 'LOADING' | 'UNLOADING';

/** One loaded (or failed) version of a model. */
export interface ModelVersion {
  readonly version: number;
  state: ModelState;
  reason: string;
  loaded?: LoadedModel;
  scheduler?: Scheduler;
  /** Statistics of this version (statistics extension, metrics). */
  stats: ModelStats;
  /** Seconds its load took (`nv_model_load_duration_secs`). */
  loadSeconds?: number;
}

/** A model of the repository: its final config, its versions, and what the server needs to serve it. */
export interface Model {
  readonly name: string;
  readonly dir: string;
  /** Final config (normalized and auto-completed); undefined when the config itself failed. */
  config?: ModelConfig;
  /** Model-level failure (config syntax, backend), reported as the state of every version. */
  state: ModelState;
  reason: string;
  versions: Map<number, ModelVersion>;
  /** Class labels per output name, from `label_filename`. */
  labels: Map<string, string[]>;
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
