import type { ModelConfig } from '../config/model-config.js';
import { DirectScheduler } from './direct.js';
import { DynamicBatcher } from './dynamic.js';
import type { Scheduler, SchedulerContext } from './scheduler.js';

export { DirectScheduler } from './direct.js';
export { DynamicBatcher, type DynamicBatcherOptions } from './dynamic.js';
export type { ScheduledResult, Scheduler, SchedulerContext, ScheduleOptions } from './scheduler.js';

/**
 * The scheduler a model version gets, as in Triton: the dynamic batcher when the config has
 * `dynamic_batching` and the model batches (max_batch_size > 0), else direct (one request per execution).
 */
export function createScheduler(config: ModelConfig, ctx: SchedulerContext): Scheduler {
  if (config.dynamic_batching && ctx.maxBatchSize > 0) {
    const raggedInputs = new Set((config.input ?? []).filter((i) => i.allow_ragged_batch).map((i) => i.name as string));
    return new DynamicBatcher(ctx, { batching: config.dynamic_batching, raggedInputs });
  }
  return new DirectScheduler(ctx);
}
