import type { ModelConfig } from './model-config.js';

/**
 * Tensor names of a model that the sequence batcher handles, not the client: control inputs and implicit-state
 * inputs it feeds, state outputs it takes back. Auto-complete leaves them out of `input`/`output`, and the check
 * of a config against its model file does not ask for them there.
 */

type Obj = Record<string, unknown>;
const asArray = (v: unknown): Obj[] => (Array.isArray(v) ? (v as Obj[]) : []);
const sb = (config: ModelConfig): Obj => (config.sequence_batching ?? {}) as Obj;

/** Control input names and state input names. */
export function scheduledInputNames(config: ModelConfig): Set<string> {
  const names = new Set<string>();
  for (const ci of asArray(sb(config).control_input)) if (typeof ci.name === 'string') names.add(ci.name);
  for (const s of asArray(sb(config).state)) if (typeof s.input_name === 'string') names.add(s.input_name);
  return names;
}

/** State output names. */
export function stateOutputNames(config: ModelConfig): Set<string> {
  const names = new Set<string>();
  for (const s of asArray(sb(config).state)) if (typeof s.output_name === 'string') names.add(s.output_name);
  return names;
}
