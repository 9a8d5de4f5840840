import { sweepStaleSegments } from '../backends/runtime/process/owner.js';
import type { Logger } from '../core/logger.js';
import { sweepStaleOverrideDirs } from '../repository/overrides.js';

/**
 * What servers killed before they could clean up (kill -9, OOM) left behind, removed when a server starts: nothing
 * else would. Override folders of load requests (in the temp folder) and the /dev/shm segments of the process
 * transport; those of live servers, this one included, stay (overrides.ts and owner.ts say how each is told apart).
 */
export async function sweepLeftovers(logger: Logger): Promise<void> {
  const swept = await sweepStaleOverrideDirs();
  if (swept.length > 0) logger.info({ swept }, `removed ${swept.length} override folders left by stopped servers`);
  try {
    const owners = sweepStaleSegments();
    if (owners.length > 0) logger.info({ owners }, `removed the shared memory of ${owners.length} stopped servers`);
  } catch (err) {
    // A sweep that cannot run (no /dev/shm locks here) must not stop the server; the segments only take room.
    logger.warn({ err }, 'could not sweep /dev/shm for the segments of stopped servers');
  }
}
