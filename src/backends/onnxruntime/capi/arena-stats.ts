import { check, ortApi, type Out, type Ptr } from './api.js';

/** A session's CPU arena statistics (AllocatorGetStats), numbers by key. */
export function arenaStats(session: Ptr, cpuMemoryInfo: Ptr): Record<string, number> {
  const api = ortApi();
  const out: Out = [null];
  check(api.CreateAllocator(session, cpuMemoryInfo, out));
  const allocator = out[0] as Ptr;
  try {
    check(api.AllocatorGetStats(allocator, out));
    const kvps = out[0] as Ptr;
    try {
      const stats: Record<string, number> = {};
      for (const key of [
        'Limit',
        'InUse',
        'TotalAllocated',
        'MaxInUse',
        'NumAllocs',
        'NumReserves',
        'NumArenaExtensions',
        'NumArenaShrinkages',
        'MaxAllocSize',
      ]) {
        const v = api.GetKeyValue(kvps, key) as string | null;
        if (v !== null) stats[key] = Number(v);
      }
      return stats;
    } finally {
      api.ReleaseKeyValuePairs(kvps);
    }
  } finally {
    api.ReleaseAllocator(allocator);
  }
}
