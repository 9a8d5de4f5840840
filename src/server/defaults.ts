import { InvalidArgError } from '../core/errors.js';

/**
 * The server's defaults, in one frozen object (Triton's values): the command line's flag defaults, `serve()` and
 * the InferenceServer all read them here, and options are validated once, at start.
 */
export const SERVER_DEFAULTS = Object.freeze({
  httpPort: 8000,
  grpcPort: 8001,
  metricsPort: 8002,
  address: '0.0.0.0',
  allowHttp: true,
  allowGrpc: true,
  allowMetrics: true,
  autoComplete: true,
  strictReadiness: true,
  exitOnError: true,
  id: 'triton',
  modelControlMode: 'none' as 'none' | 'poll' | 'explicit',
  repositoryPollSecs: 15,
  exitTimeoutSecs: 30,
  /** `serve()`'s front-end threads: the main thread serves the protocols itself (`nereid serve`: the cores). */
  httpThreadCount: 1,
});

const MODES = ['none', 'poll', 'explicit'];

/** Throws INVALID_ARG naming the first option out of range. */
export function checkServerOptions(o: {
  httpPort?: number;
  grpcPort?: number;
  metricsPort?: number;
  modelControlMode?: string;
  repositoryPollSecs?: number;
  exitTimeoutSecs?: number;
}): void {
  for (const [name, port] of [
    ['httpPort', o.httpPort],
    ['grpcPort', o.grpcPort],
    ['metricsPort', o.metricsPort],
  ] as const) {
    if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) {
      throw new InvalidArgError(`${name} must be an integer from 0 to 65535, got ${port}`);
    }
  }
  if (o.modelControlMode !== undefined && !MODES.includes(o.modelControlMode)) {
    throw new InvalidArgError(`modelControlMode must be one of ${MODES.join(', ')}, got '${o.modelControlMode}'`);
  }
  for (const [name, v] of [
    ['repositoryPollSecs', o.repositoryPollSecs],
    ['exitTimeoutSecs', o.exitTimeoutSecs],
  ] as const) {
    if (v !== undefined && (!Number.isFinite(v) || v < 0)) {
      throw new InvalidArgError(`${name} must be a non-negative number, got ${v}`);
    }
  }
}
