import type { ErrorCode } from '../../core/errors.js';
import type { ExecuteTimings, ModelSignature } from '../backend.js';
import type { WireTensor } from './convert.js';
import type { OrtRunOptions, OrtSessionOptions } from './options.js';

/**
 * Messages between the main thread and a session worker (worker.ts). Plain data only: tensors cross as
 * WireTensor with their buffers in the transfer list, errors as code + message (Error subclasses do not
 * survive structured clone with their class).
 */

/** `workerData` of a session worker. */
export interface WorkerInit {
  /** `signature`: load, report the signature, exit. `instance`: load, then serve `run` messages until `close`. */
  mode: 'signature' | 'instance';
  modelPath: string;
  session: OrtSessionOptions & { logSeverityLevel?: 0 | 1 | 2 | 3 | 4 };
  run: OrtRunOptions;
}

export type ToWorker =
  | { type: 'run'; id: number; inputs: WireTensor[]; outputs: string[] }
  /** Release the session and exit; the worker answers nothing more. */
  | { type: 'close' }
  /** Fault injection for tests: the worker exits at once with code 70, as a crashed worker would. */
  | { type: '__crash' };

export interface WireError {
  code: ErrorCode;
  message: string;
}

export type FromWorker =
  | { type: 'ready'; signature: ModelSignature }
  | { type: 'load-error'; error: WireError }
  | { type: 'result'; id: number; outputs: WireTensor[]; timings: ExecuteTimings }
  | { type: 'run-error'; id: number; error: WireError };
