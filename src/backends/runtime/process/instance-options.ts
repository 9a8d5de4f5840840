import type { DeviceMemory } from '../../../core/device.js';
import type { Logger } from '../../../core/logger.js';
import type { EngineRequest, EngineResponse } from '../../contract.js';

/** What a ProcessInstance (process/instance.ts) is created with: the engine's payload and the runtime's rules. */
export interface ProcessInstanceOptions {
  /** `<model>_<n>`: in logs and every error. */
  name: string;
  /** What the child needs to create the instance (engine-specific, plain data). */
  payload: unknown;
  /** Decoupled models answer any number of times per request, after `execute` returns. */
  decoupled: boolean;
  /** A call to `execute` in the child must return within this, or the process is killed. 0 = no limit. */
  executeTimeoutMs: number;
  /** How long `destroy` waits for the child's finalize (and for its exit) before killing it. */
  destroyGraceMs: number;
  /** Turns each response into the one the host receives (pick and order outputs, check them); may throw. */
  check?: (request: EngineRequest, response: EngineResponse) => EngineResponse;
  /** Close the process when this instance is destroyed (it hosts only this one). */
  ownsProcess: boolean;
  /** 'name': inputs of one name lie back to back across the batch's requests (see writeTensorGroupsByName). */
  inputLayout?: 'request' | 'name';
  /** Bound with the instance (and model) by the caller; records here add no such keys again. */
  logger: Logger;
  /**
   * The CUDA device the engine in the child reads inputs from and writes outputs into directly (it opens client
   * regions' IPC handles itself). Absent: host memory only.
   */
  deviceMemory?: DeviceMemory;
}
