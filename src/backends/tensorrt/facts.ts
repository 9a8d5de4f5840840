import { maxBatchOf, type ModelConfig, type ModelInput, type ModelOutput } from '../../config/model-config.js';
import { DATATYPES, dataTypeFromConfig, type DataType } from '../../core/datatypes.js';
import { InvalidArgError, UnsupportedError } from '../../core/errors.js';

/**
 * What a plan declares (read by python/nereid_python/engines/tensorrt/facts.py in a short-lived process) and the
 * pure rules built on it: Triton's auto-complete for explicit-batch engines, the check of a config against the
 * plan, the profiles of an instance, and the check of a request against those profiles. Pure, so all of it is
 * tested without TensorRT.
 */

export interface PlanTensor {
  name: string;
  mode: 'input' | 'output';
  /** TensorRT's DataType name (FLOAT, HALF, ...). */
  trt_dtype: string;
  /** The KServe datatype, or null for one Triton has none for (FP8, INT4, FP4, E8M0). */
  datatype: DataType | null;
  /** -1 for a dynamic dim. */
  dims: number[];
  shape_tensor: boolean;
  location: string;
}

export interface ProfileRange {
  min: number[];
  opt: number[];
  max: number[];
}

export interface PlanProfile {
  index: number;
  inputs: Record<string, ProfileRange>;
}

export interface PlanFacts {
  trt_version: string;
  flavor?: string;
  device_name?: string;
  io: PlanTensor[];
  profiles: PlanProfile[];
  device_memory?: { static?: number; per_profile?: number[] };
}

const fmt = (d: readonly number[]): string => `[${d.join(',')}]`;

export function inputsOf(facts: PlanFacts): PlanTensor[] {
  return facts.io.filter((t) => t.mode === 'input');
}

export function outputsOf(facts: PlanFacts): PlanTensor[] {
  return facts.io.filter((t) => t.mode === 'output');
}

/** Triton's profile names are decimal indices into the plan's optimization profiles. */
export function profileIndex(name: string, facts: PlanFacts, where: string): number {
  if (!/^\d+$/.test(name.trim())) {
    throw new InvalidArgError(
      `${where}: profile '${name}' is not a profile index (expected 0..${facts.profiles.length - 1})`,
    );
  }
  const idx = Number(name);
  if (idx >= facts.profiles.length) {
    throw new InvalidArgError(
      `${where}: profile ${idx} does not exist; the plan has ${facts.profiles.length} optimization profile(s) (0..${facts.profiles.length - 1})`,
    );
  }
  return idx;
}

/** The profile indices an instance group may use: its `profile` list, or profile 0 (Triton's default). */
export function instanceProfiles(names: readonly string[], facts: PlanFacts, where: string): number[] {
  if (names.length === 0) return [0];
  return [...new Set(names.map((n) => profileIndex(n, facts, where)))];
}

/** The largest batch the listed profiles admit: per profile the least max dim 0 over its inputs (Triton). */
export function maxBatchOfProfiles(facts: PlanFacts, profiles: readonly number[]): number {
  let best = 0;
  for (const p of profiles) {
    let least = Number.MAX_SAFE_INTEGER;
    for (const r of Object.values(facts.profiles[p]?.inputs ?? {})) least = Math.min(least, r.max[0] ?? 0);
    if (least !== Number.MAX_SAFE_INTEGER) best = Math.max(best, least);
  }
  return best;
}

/** Refuses what Nereid's TensorRT engine cannot serve, naming the tensor. */
export function checkServable(facts: PlanFacts, model: string): void {
  for (const t of facts.io) {
    if (t.shape_tensor) {
      throw new UnsupportedError(
        `model '${model}': tensor '${t.name}' is a shape tensor; Nereid's TensorRT backend does not serve shape tensors yet`,
      );
    }
    if (t.datatype === null) {
      throw new UnsupportedError(
        `model '${model}': tensor '${t.name}' is TensorRT ${t.trt_dtype}, which has no Triton datatype`,
      );
    }
  }
}

function configDims(t: ModelInput | ModelOutput): number[] {
  return t.reshape ? (t.reshape.shape ?? []) : (t.dims ?? []);
}

function completeTensor(t: PlanTensor, batching: boolean): ModelInput & ModelOutput {
  const dims = batching ? t.dims.slice(1) : [...t.dims];
  const data_type = DATATYPES[t.datatype as DataType].configName as ModelInput['data_type'];
  if (dims.length === 0) return { name: t.name, data_type, dims: [1], reshape: { shape: [] } };
  return { name: t.name, data_type, dims };
}

/** All profile indices the config's instance groups use (profile 0 when none lists any). */
export function usedProfiles(config: ModelConfig, facts: PlanFacts, model: string): number[] {
  const used = new Set<number>();
  for (const [i, g] of (config.instance_group ?? []).entries()) {
    for (const p of g.profile ?? []) used.add(profileIndex(p, facts, `model '${model}': instance_group[${i}]`));
  }
  if (used.size === 0) used.add(0);
  return [...used].sort((a, b) => a - b);
}

/**
 * Triton's tensorrt auto-complete for explicit-batch engines: the batch hint from dims the config already gives
 * (one fewer than the engine's means batching), max_batch_size from the profiles the instance groups use, the
 * dynamic batcher when it is > 1, then inputs and outputs (or their missing data_type/dims) from the plan.
 * One deliberate difference: an engine whose inputs have a fixed dim 0 is taken as not batching (Triton would call
 * its dim 0 the batch dim and accept batches the engine cannot run).
 */
export function completeFromPlan(
  input: ModelConfig,
  facts: PlanFacts,
  model: string,
  warn: (m: string) => void,
): ModelConfig {
  const config: ModelConfig = structuredClone(input);
  checkServable(facts, model);
  const byName = new Map(facts.io.map((t) => [t.name, t]));
  let hint: boolean | undefined;
  let withDims = 0;
  for (const t of [...(config.input ?? []), ...(config.output ?? [])]) {
    const e = byName.get(t.name ?? '');
    const dims = configDims(t);
    if (e === undefined || dims.length === 0) continue;
    withDims++;
    const shouldBatch = e.dims.length === dims.length + 1;
    if (hint !== undefined && hint !== shouldBatch) {
      throw new InvalidArgError(
        `model '${model}': unable to autofill: the config's tensor dims contradict each other on whether the model batches ('${t.name}' has ${dims.length} dims, the plan ${e.dims.length})`,
      );
    }
    hint = shouldBatch;
  }
  const inputs = inputsOf(facts);
  const dynamicBatch = inputs.length > 0 && inputs.every((t) => t.dims.length > 0 && t.dims[0] === -1);
  let supported = dynamicBatch ? maxBatchOfProfiles(facts, usedProfiles(config, facts, model)) : 0;
  if (hint === true && supported === 0) {
    throw new InvalidArgError(
      `model '${model}': autofill failed: the config's dims imply batching, but the plan's inputs have no dynamic batch dim (dim 0 is fixed)`,
    );
  }
  if (withDims > 0 && hint === false) {
    if (supported > 0) warn(`the dims in the config of model '${model}' imply that batching is off (max_batch_size 0)`);
    supported = 0;
  }
  const mbs = maxBatchOf(config);
  if (mbs === 0) {
    config.max_batch_size = supported;
  } else if (mbs > supported) {
    throw new InvalidArgError(
      `model '${model}': config.pbtxt sets max_batch_size ${mbs}, but the plan's optimization profile(s) ${usedProfiles(config, facts, model).join(', ')} support at most ${supported}`,
    );
  }
  const batching = maxBatchOf(config) > 0;
  if (maxBatchOf(config) > 1 && !config.dynamic_batching && !config.sequence_batching) {
    config.dynamic_batching = {};
  }
  config.input = fillIO(config.input, inputs, batching) as ModelInput[];
  config.output = fillIO(config.output, outputsOf(facts), batching) as ModelOutput[];
  return config;
}

function fillIO(
  declared: (ModelInput | ModelOutput)[] | undefined,
  plan: PlanTensor[],
  batching: boolean,
): (ModelInput | ModelOutput)[] {
  if (declared === undefined || declared.length === 0) return plan.map((t) => completeTensor(t, batching));
  return declared.map((d) => {
    const t = plan.find((p) => p.name === d.name);
    if (t === undefined) return d;
    const ref = completeTensor(t, batching);
    const out = { ...d };
    if (out.data_type === undefined || out.data_type === 'TYPE_INVALID') out.data_type = ref.data_type;
    if ((out.dims === undefined || out.dims.length === 0) && out.reshape === undefined) {
      out.dims = ref.dims;
      if (ref.reshape) out.reshape = ref.reshape;
    }
    return out;
  });
}

/**
 * The config must agree with the plan (also with auto-complete off): every plan input declared, declared tensors
 * exist with the plan's datatype and a compatible shape, and max_batch_size within what each instance group's
 * profiles support.
 */
export function checkAgainstPlan(config: ModelConfig, facts: PlanFacts, model: string): void {
  checkServable(facts, model);
  const batching = maxBatchOf(config) > 0;
  const side = (kind: 'input' | 'output', declared: (ModelInput | ModelOutput)[], plan: PlanTensor[]): void => {
    const byName = new Map(plan.map((t) => [t.name, t]));
    for (const c of declared) {
      const t = byName.get(c.name ?? '');
      if (t === undefined) {
        throw new InvalidArgError(
          `model '${model}': config.pbtxt declares ${kind} '${c.name}', but the plan's ${kind}s are [${plan.map((p) => `'${p.name}'`).join(', ')}]`,
        );
      }
      if (dataTypeFromConfig(c.data_type ?? 'TYPE_INVALID') !== t.datatype) {
        throw new InvalidArgError(
          `model '${model}': ${kind} '${c.name}' is ${t.datatype} in the plan (TensorRT ${t.trt_dtype}), but config.pbtxt says data_type: ${c.data_type}`,
        );
      }
      const dims = configDims(c);
      const full = batching ? [-1, ...dims] : dims;
      const ok = full.length === t.dims.length && full.every((d, i) => d === -1 || t.dims[i] === -1 || d === t.dims[i]);
      if (!ok) {
        throw new InvalidArgError(
          `model '${model}': ${kind} '${c.name}' has shape ${fmt(t.dims)} in the plan, but config.pbtxt gives ${fmt(full)} (dims ${fmt(dims)}${batching ? `, with max_batch_size ${config.max_batch_size} adding the batch dim` : ''})`,
        );
      }
      if (batching && t.dims[0] !== -1) {
        throw new InvalidArgError(
          `model '${model}': max_batch_size ${config.max_batch_size} needs a dynamic batch dim, but ${kind} '${c.name}' has shape ${fmt(t.dims)} in the plan; set max_batch_size: 0`,
        );
      }
    }
  };
  side('input', config.input ?? [], inputsOf(facts));
  side('output', config.output ?? [], outputsOf(facts));
  const declared = new Set((config.input ?? []).map((i) => i.name));
  const missing = inputsOf(facts).filter((t) => !declared.has(t.name));
  if (missing.length > 0) {
    throw new InvalidArgError(
      `model '${model}': the plan needs input(s) [${missing.map((t) => `'${t.name}'`).join(', ')}] that config.pbtxt does not declare`,
    );
  }
  if (batching) {
    for (const [i, g] of (config.instance_group ?? []).entries()) {
      const profiles = instanceProfiles(g.profile ?? [], facts, `model '${model}': instance_group[${i}]`);
      const most = maxBatchOfProfiles(facts, profiles);
      if (maxBatchOf(config) > most) {
        throw new InvalidArgError(
          `model '${model}': max_batch_size ${config.max_batch_size} exceeds what instance_group[${i}]'s profile(s) ${profiles.join(', ')} support (${most}); lower max_batch_size or list a profile with a larger batch`,
        );
      }
    }
  }
}

function fits(range: ProfileRange, shape: readonly number[]): boolean {
  return shape.length === range.min.length && shape.every((d, i) => d >= range.min[i] && d <= range.max[i]);
}

/** `profile 0: [1..32,512]; profile 1: [1..8,1..1024]` for one input. */
export function describeRanges(facts: PlanFacts, profiles: readonly number[], input: string): string {
  return profiles
    .map((p) => {
      const r = facts.profiles[p]?.inputs[input];
      if (r === undefined) return '';
      return `profile ${p}: [${r.min.map((lo, i) => (lo === r.max[i] ? String(lo) : `${lo}..${r.max[i]}`)).join(',')}]`;
    })
    .filter((s) => s !== '')
    .join('; ');
}

/**
 * Checks one request's input shapes (full shapes, batch dim included when batching) against the profiles of an
 * instance: some profile must hold every input. Returns undefined when one does, else the message of the 400.
 */
export function requestOutsideProfiles(
  facts: PlanFacts,
  profiles: readonly number[],
  shapes: ReadonlyMap<string, readonly number[]>,
): string | undefined {
  const holds = (p: number): boolean =>
    [...shapes].every(([name, shape]) => {
      const r = facts.profiles[p]?.inputs[name];
      return r === undefined || fits(r, shape);
    });
  if (profiles.some(holds)) return undefined;
  for (const [name, shape] of shapes) {
    const ok = profiles.some((p) => {
      const r = facts.profiles[p]?.inputs[name];
      return r === undefined || fits(r, shape);
    });
    if (!ok) {
      return `input '${name}' shape ${fmt(shape)} is outside every optimization profile of this instance (${describeRanges(facts, profiles, name)})`;
    }
  }
  return `the input shapes [${[...shapes].map(([n, s]) => `${n}: ${fmt(s)}`).join('; ')}] fit no single optimization profile of this instance together (${[...shapes.keys()].map((n) => `${n}: ${describeRanges(facts, profiles, n)}`).join(' | ')})`;
}
