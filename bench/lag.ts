/**
 * Event-loop delay reporting for server processes started by the benchmark (Nereid's launcher and the fastify
 * peer): perf_hooks.monitorEventLoopDelay, read and reset over the fork IPC channel.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';

export interface LagReading {
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

export type LagMessage = { lag: LagReading } | { ready: true };

/** Starts the histogram; answers 'lag' (and resets) and 'reset' messages from the parent. */
export function reportEventLoopDelay(): void {
  if (!process.send) return;
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  process.on('message', (m: unknown) => {
    if (m === 'reset') h.reset();
    if (m === 'lag') {
      process.send?.({ lag: { p50_ms: h.percentile(50) / 1e6, p99_ms: h.percentile(99) / 1e6, max_ms: h.max / 1e6 } });
      h.reset();
    }
  });
  // The IPC channel must not keep the server alive on its own.
  process.channel?.unref();
}
