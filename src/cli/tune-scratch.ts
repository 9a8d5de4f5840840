import { noopLogger } from '../core/logger.js';
import { serve } from '../serve.js';
import type { ScratchServer } from '../tools/tune/target.js';

/**
 * The scratch server `nereid tune` measures on: loopback HTTP only, explicit model control, code in load requests
 * allowed (every model on it is the one being tuned, sent by this process), silent.
 */
export async function startScratchServer(repository: string): Promise<ScratchServer> {
  const running = await serve({
    repositories: [repository],
    modelControlMode: 'explicit',
    allowCodeInLoadRequests: true,
    httpPort: 0,
    httpAddress: '127.0.0.1',
    httpThreadCount: 1,
    allowGrpc: false,
    allowMetrics: false,
    logger: noopLogger,
  });
  return { url: running.httpUrl as string, close: () => running.close() };
}
