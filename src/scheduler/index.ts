import type { ModelConfig } from '../config/model-config.js';
import { DirectScheduler } from './direct.js';
import { DynamicBatcher } from './dynamic.js';
import type { Scheduler, SchedulerContext } from './scheduler.js';
import { SequenceBatcher } from './sequence/batcher.js';
import type { SequenceSpec } from './sequence/spec.js';

export { DirectScheduler } from './direct.js';
export { DynamicBatcher, type DynamicBatcherOptions } from './dynamic.js';
export { SequenceBatcher } from './sequence/batcher.js';
export { loadSequenceSpec, MAX_BACKLOG_PARAM, type SequenceSpec } from './sequence/spec.js';
export type { ScheduledResult, Scheduler, SchedulerContext, ScheduleOptions } from './scheduler.js';

/** What a scheduler needs beyond the config, resolved by the loader. */
export interface SchedulerExtras {
  /** `sequence_batching` resolved (initial states read). */
  sequence?: SequenceSpec;
}

/**
 * The scheduler a model version gets, as in Triton: the sequence batcher when the config has
 * `sequence_batching`; the dynamic batcher when it has `dynamic_batching` and the model batches
 * (max_batch_size > 0); else direct (one request per execution).
 */
export function createScheduler(config: ModelConfig, ctx: SchedulerContext, extras: SchedulerExtras = {}): Scheduler {
  const raggedInputs = new Set((config.input ?? []).filter((i) => i.allow_ragged_batch).map((i) => i.name as string));
  if (extras.sequence !== undefined) return new SequenceBatcher(ctx, { spec: extras.sequence, raggedInputs });
  if (config.dynamic_batching && ctx.maxBatchSize > 0) {
    return new DynamicBatcher(ctx, { batching: config.dynamic_batching, raggedInputs });
  }
  return new DirectScheduler(ctx);
}
