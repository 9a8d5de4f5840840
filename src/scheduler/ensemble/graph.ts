import type { ModelConfig } from '../../config/model-config.js';
import type { DataType } from '../../core/datatypes.js';
import { InvalidArgError, UnsupportedError } from '../../core/errors.js';

/**
 * An ensemble's `ensemble_scheduling { step [...] }` resolved once at load into a data-flow graph over ensemble
 * tensors: which step produces each tensor, which steps consume it, and how often each tensor is used (so the
 * scheduler knows when it may hand a tensor over instead of copying it). Checked as Triton checks it: every step
 * input reads a tensor that exists, a tensor has one producer, every tensor is used, every output is written; and
 * a cycle is named. Pure.
 */

export interface EnsembleStep {
  readonly index: number;
  readonly model: string;
  /** -1: the latest ready version. */
  readonly version: number;
  /** [step model input, ensemble tensor] */
  readonly inputMap: readonly (readonly [string, string])[];
  /** [step model output, ensemble tensor] */
  readonly outputMap: readonly (readonly [string, string])[];
  /** Distinct ensemble tensors it reads: it runs once all exist. */
  readonly reads: readonly string[];
}

export interface EnsembleGraph {
  readonly name: string;
  readonly steps: readonly EnsembleStep[];
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  /** Steps reading each tensor (by index). */
  readonly consumers: ReadonlyMap<string, readonly number[]>;
  /** Uses of each tensor per request: one per consuming step input, plus one when it is an ensemble output. */
  readonly uses: ReadonlyMap<string, number>;
  /** Steps with no input produced by another step: they start a request. */
  readonly roots: readonly number[];
  /** Composing model names, distinct, in step order. */
  readonly models: readonly string[];
}

type Obj = Record<string, unknown>;
const asArray = (v: unknown): Obj[] => (Array.isArray(v) ? (v as Obj[]) : []);
const entries = (v: unknown): [string, string][] =>
  Object.entries((v ?? {}) as Record<string, unknown>).map(([k, x]) => [k, String(x)]);

const stepName = (s: EnsembleStep): string => `step ${s.index} ('${s.model}')`;

export function buildEnsembleGraph(config: ModelConfig): EnsembleGraph {
  const name = config.name ?? '';
  const raw = asArray((config.ensemble_scheduling ?? {}).step);
  if (raw.length === 0) throw new InvalidArgError(`must specify 'step' for ensemble '${name}'`);
  const steps: EnsembleStep[] = raw.map((s, index) => {
    if (typeof s.model_namespace === 'string' && s.model_namespace !== '') {
      throw new UnsupportedError(
        `ensemble '${name}': step ${index} sets model_namespace '${s.model_namespace}'; model namespacing is not supported by Nereid yet`,
      );
    }
    const inputMap = entries(s.input_map);
    const outputMap = entries(s.output_map);
    return Object.freeze({
      index,
      model: String(s.model_name ?? ''),
      version: typeof s.model_version === 'number' && s.model_version > 0 ? s.model_version : -1,
      inputMap,
      outputMap,
      reads: [...new Set(inputMap.map(([, t]) => t))],
    });
  });
  const inputs = (config.input ?? []).map((t) => t.name as string);
  const outputs = (config.output ?? []).map((t) => t.name as string);
  const producer = new Map<string, EnsembleStep>();
  for (const s of steps) {
    for (const [out, t] of s.outputMap) {
      const other = producer.get(t);
      if (other !== undefined || inputs.includes(t)) {
        throw new InvalidArgError(
          `ensemble tensor '${t}' can appear in an output map only once for ensemble '${name}' (${stepName(s)} output '${out}' writes it, and so does ${other ? stepName(other) : 'the ensemble input of that name'})`,
        );
      }
      producer.set(t, s);
    }
  }
  const consumers = new Map<string, number[]>();
  for (const s of steps) {
    for (const [input, t] of s.inputMap) {
      if (!inputs.includes(t) && !producer.has(t)) {
        throw new InvalidArgError(
          `ensemble '${name}': ${stepName(s)} maps its input '${input}' to ensemble tensor '${t}', which is neither an ensemble input nor an output of any step`,
        );
      }
    }
    for (const t of s.reads) consumers.set(t, [...(consumers.get(t) ?? []), s.index]);
  }
  checkCycles(steps, producer, name);
  for (const o of outputs) {
    if (!producer.has(o) && !inputs.includes(o)) {
      throw new InvalidArgError(`output '${o}' for ensemble '${name}' is not written by any step`);
    }
  }
  for (const i of inputs) {
    if (!consumers.has(i) && !outputs.includes(i)) {
      throw new InvalidArgError(`ensemble input '${i}' for ensemble '${name}' is not used by any step`);
    }
  }
  for (const t of producer.keys()) {
    if (!consumers.has(t) && !outputs.includes(t)) {
      throw new InvalidArgError(
        `ensemble tensor '${t}' is unused in ensemble '${name}' (written by ${stepName(producer.get(t) as EnsembleStep)}, read by no step and not an ensemble output)`,
      );
    }
  }
  const uses = new Map<string, number>();
  for (const s of steps) for (const [, t] of s.inputMap) uses.set(t, (uses.get(t) ?? 0) + 1);
  for (const o of outputs) uses.set(o, (uses.get(o) ?? 0) + 1);
  return Object.freeze({
    name,
    steps,
    inputs,
    outputs,
    consumers,
    uses,
    roots: steps.filter((s) => s.reads.every((t) => !producer.has(t))).map((s) => s.index),
    models: [...new Set(steps.map((s) => s.model))],
  });
}

/** Depth-first search over step → steps it reads from; a back edge is a cycle, named step by step. */
function checkCycles(steps: readonly EnsembleStep[], producer: ReadonlyMap<string, EnsembleStep>, name: string): void {
  const state = new Array<0 | 1 | 2>(steps.length).fill(0);
  const path: EnsembleStep[] = [];
  const visit = (s: EnsembleStep): void => {
    if (state[s.index] === 2) return;
    if (state[s.index] === 1) {
      const loop = [...path.slice(path.indexOf(s)), s].reverse();
      throw new InvalidArgError(
        `ensemble '${name}' has a cycle: ${loop.map(stepName).join(' → ')} (each feeds the next through its outputs)`,
      );
    }
    state[s.index] = 1;
    path.push(s);
    for (const t of s.reads) {
      const p = producer.get(t);
      if (p !== undefined) visit(p);
    }
    path.pop();
    state[s.index] = 2;
  };
  for (const s of steps) visit(s);
}

/** What the graph check needs of a composing model: its tensors' datatypes. */
export interface ComposingModel {
  readonly inputs: ReadonlyMap<string, { readonly datatype: DataType; readonly optional: boolean }>;
  readonly outputs: ReadonlyMap<string, { readonly datatype: DataType }>;
}

/**
 * Checks the maps against the composing models (Triton's wording): each mapped input and output exists, every
 * required input is mapped, and a tensor has one datatype wherever it appears.
 */
export function checkComposing(
  graph: EnsembleGraph,
  models: ReadonlyMap<string, ComposingModel>,
  ensembleTypes: ReadonlyMap<string, DataType>,
): void {
  const name = graph.name;
  const types = new Map<string, [DataType, string]>();
  for (const [t, dt] of ensembleTypes) types.set(t, [dt, `ensemble '${name}'`]);
  const agree = (t: string, dt: DataType, where: string): void => {
    const seen = types.get(t);
    if (seen === undefined) types.set(t, [dt, where]);
    else if (seen[0] !== dt) {
      throw new InvalidArgError(
        `in ensemble ${name}, ensemble tensor '${t}': inconsistent data type: ${dt} is inferred from ${where} while ${seen[0]} is inferred from ${seen[1]}`,
      );
    }
  };
  for (const s of graph.steps) {
    const m = models.get(s.model) as ComposingModel;
    for (const [input, t] of s.inputMap) {
      const spec = m.inputs.get(input);
      if (spec === undefined) {
        throw new InvalidArgError(
          `in ensemble ${name}, ensemble tensor ${t} is mapping to non-existing input ${input} in model ${s.model}`,
        );
      }
      agree(t, spec.datatype, `model ${s.model}`);
    }
    for (const [input, spec] of m.inputs) {
      if (!spec.optional && !s.inputMap.some(([i]) => i === input)) {
        throw new InvalidArgError(
          `in ensemble ${name}, input ${input} in model ${s.model} is not mapped to any ensemble tensors`,
        );
      }
    }
    for (const [output, t] of s.outputMap) {
      const spec = m.outputs.get(output);
      if (spec === undefined) {
        throw new InvalidArgError(
          `in ensemble ${name}, ensemble tensor ${t} is mapped from non-existing output ${output} in model ${s.model}`,
        );
      }
      agree(t, spec.datatype, `model ${s.model}`);
    }
  }
}
