import type { ModelConfig } from '../../../config/model-config.js';
import type { Parameters } from '../../../core/inference.js';
import type {
  AutoCompleted,
  EngineAutoCompleteContext,
  EngineLoadContext,
  ExecuteTimings,
  InstanceSpec,
} from '../../contract.js';
import type { WireBatch, WireError, WireTensor } from './wire.js';

/**
 * Messages between the host (main thread) and an engine thread (harness.ts). One engine thread loads one
 * model version (`EngineAdapter.load`) and hosts the instances the host creates in it.
 */

/** `workerData` of an engine thread. */
export type WorkerData =
  | { mode: 'model'; adapterUrl: string; ctx: EngineLoadContext }
  | { mode: 'autocomplete'; adapterUrl: string; config: ModelConfig; ctx: EngineAutoCompleteContext };

export type ToEngine =
  | { type: 'create'; id: number; spec: InstanceSpec }
  | { type: 'execute'; id: number; instance: number; batch: WireBatch }
  | { type: 'cancel'; id: number }
  | { type: 'destroy'; instance: number }
  /** Unload the model and end the thread; nothing more is answered after 'unloaded'. */
  | { type: 'unload' }
  /** Fault injection for tests: the thread exits at once with code 70, as a crashed engine thread would. */
  | { type: '__crash' };

export interface WireResponse {
  index: number;
  final: boolean;
  outputs?: WireTensor[];
  parameters?: Parameters;
  error?: WireError;
}

export type FromEngine =
  | { type: 'loaded' }
  | { type: 'load-error'; error: WireError }
  | { type: 'autocompleted'; result: AutoCompleted }
  | { type: 'created'; id: number }
  | { type: 'create-error'; id: number; error: WireError }
  /** Responses sent after their execute settled (decoupled models). */
  | { type: 'responses'; id: number; responses: WireResponse[] }
  | { type: 'done'; id: number; responses: WireResponse[]; timings: ExecuteTimings }
  /** `fault`: the engine said the instance must not run again (EngineFault). */
  | { type: 'failed'; id: number; responses: WireResponse[]; error: WireError; fault: boolean }
  | { type: 'destroyed'; instance: number }
  | { type: 'unloaded' }
  /** A line of the engine's own log (its warnings, say): the host writes it with its logger. */
  | { type: 'log'; level: LogLevel; obj: Record<string, unknown>; msg: string };

export type LogLevel = 'error' | 'warn' | 'info' | 'debug' | 'trace';
