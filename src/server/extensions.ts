/**
 * Extensions reported by server metadata, in Triton's order, limited to what Nereid implements today.
 * A tool that reads this list (perf_analyzer does) must never be told of a feature that is not there.
 */
export const EXTENSIONS: readonly string[] = Object.freeze([
  'classification',
  // The sequence batcher (correlation ids, uint64 or string, with start/end flags): scheduler/sequence/.
  'sequence',
  'model_repository',
  'model_repository(unload_dependents)',
  // The dynamic batcher's priority levels and queue policies (timeouts, sizes): scheduler/.
  'schedule_policy',
  'model_configuration',
  'system_shared_memory',
  'binary_tensor_data',
  'parameters',
  'statistics',
  'trace',
  'logging',
]);
