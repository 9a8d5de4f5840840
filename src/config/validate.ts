/**
 * Checks a parsed (and normalized) ModelConfig for values the schema allows but Triton rejects, following
 * core's ValidateModelConfig / ValidateModelIOConfig. Pure: no I/O and no defaults filled. Every problem
 * is returned (not just the first), without line numbers since the config may come from JSON or
 * auto-complete; each message names the field path and says what to change.
 */
import type { ConfigError } from './config-error.js';
import { maxBatchOf, type ModelConfig, type ModelInput, type ModelOutput } from './model-config.js';

/** Options for validateModelConfig. */
export interface ValidateOptions {
  /** The model's directory name: Triton requires `name`, when set, to equal it. */
  modelName?: string;
}

type Obj = Record<string, unknown>;
type Report = (path: string, message: string) => void;

const asObj = (v: unknown): Obj => (typeof v === 'object' && v !== null ? (v as Obj) : {});
const asArray = (v: unknown): Obj[] => (Array.isArray(v) ? (v as Obj[]) : []);
const num = (v: unknown): number => (typeof v === 'number' ? v : 0);

/** Every problem found in `config`; `file` names where it came from. An empty list means valid. */
export function validateModelConfig(config: ModelConfig, file: string, options: ValidateOptions = {}): ConfigError[] {
  const errors: ConfigError[] = [];
  const report: Report = (path, message) =>
    errors.push({ file, line: 0, column: 0, path, message: `${path}: ${message}` });
  const maxBatch = maxBatchOf(config);

  if (config.name !== undefined && options.modelName !== undefined && config.name !== options.modelName) {
    report(
      'ModelConfig.name',
      `'${config.name}' does not match the model directory '${options.modelName}'; rename one or drop 'name'`,
    );
  }
  if (config.name !== undefined && /[/\\]/.test(config.name)) {
    report('ModelConfig.name', `'${config.name}' must not contain path separators`);
  }
  if (maxBatch < 0)
    report('ModelConfig.max_batch_size', `must be >= 0 (0 means the model has no batch dimension), got ${maxBatch}`);

  checkTensors('input', config.input ?? [], report);
  checkTensors('output', config.output ?? [], report);
  checkVersionPolicy(config, report);
  checkInstanceGroups(config, report);
  checkDynamicBatching(config, maxBatch, report);
  checkSequenceBatching(asObj(config.sequence_batching), config.sequence_batching !== undefined, maxBatch, report);
  checkEnsemble(config, report);
  checkWarmup(config, maxBatch, report);
  if (config.response_cache?.enable && config.model_transaction_policy?.decoupled) {
    report(
      'ModelConfig.response_cache.enable',
      'the response cache does not support decoupled models; disable one of them',
    );
  }
  return errors;
}

function checkTensors(kind: 'input' | 'output', tensors: Array<ModelInput | ModelOutput>, report: Report): void {
  const seen = new Set<string>();
  tensors.forEach((t, i) => {
    const path = `ModelConfig.${kind}[${i}]`;
    if (!t.name) report(`${path}.name`, `every ${kind} needs a name`);
    else if (seen.has(t.name)) report(`${path}.name`, `${kind} '${t.name}' is declared more than once`);
    else seen.add(t.name);
    if (t.data_type === undefined || t.data_type === 'TYPE_INVALID') {
      report(`${path}.data_type`, `${kind} '${t.name ?? ''}' needs a data_type such as TYPE_FP32`);
    }
    const dims = t.dims ?? [];
    if (dims.length === 0 && t.reshape === undefined) {
      report(
        `${path}.dims`,
        `${kind} '${t.name ?? ''}' needs dims (use -1 for a variable-size dimension, or reshape: { shape: [ ] } with dims: [ 1 ] for a scalar)`,
      );
    }
    checkDims(dims, `${path}.dims`, report);
    if (t.reshape) {
      const shape = t.reshape.shape ?? [];
      checkDims(shape, `${path}.reshape.shape`, report);
      const count = (d: number[]): number => d.reduce((a, b) => a * b, 1);
      const fixed = (d: number[]): boolean => d.every((x) => x >= 1);
      if (fixed(dims) && fixed(shape) && count(dims) !== count(shape)) {
        report(
          `${path}.reshape`,
          `reshape [${shape.join(',')}] has ${count(shape)} elements but dims [${dims.join(',')}] have ${count(dims)}; they must match`,
        );
      }
    }
    const format = (t as ModelInput).format;
    if (format !== undefined && format !== 'FORMAT_NONE' && dims.length !== 3) {
      report(`${path}.format`, `${format} needs exactly 3 dims (without the batch dimension), got [${dims.join(',')}]`);
    }
  });
}

function checkDims(dims: number[], path: string, report: Report): void {
  dims.forEach((d, j) => {
    if (d < -1 || d === 0)
      report(`${path}[${j}]`, `dimension ${d} is not allowed; use a size >= 1, or -1 for a variable-size dimension`);
  });
}

function checkVersionPolicy(config: ModelConfig, report: Report): void {
  const policy = config.version_policy;
  if (!policy) return;
  const path = 'ModelConfig.version_policy';
  if (policy.latest && num(policy.latest.num_versions) < 1)
    report(`${path}.latest.num_versions`, 'must be >= 1 to serve at least one version');
  if (policy.specific) {
    const versions = policy.specific.versions ?? [];
    if (versions.length === 0) report(`${path}.specific.versions`, 'list at least one version number');
    versions.forEach((v, i) => {
      if (v < 1) report(`${path}.specific.versions[${i}]`, `version ${v} is not valid; versions are numbered from 1`);
    });
  }
}

function checkInstanceGroups(config: ModelConfig, report: Report): void {
  (config.instance_group ?? []).forEach((g, i) => {
    const path = `ModelConfig.instance_group[${i}]`;
    if (g.count !== undefined && g.count < 1) report(`${path}.count`, `must be >= 1, got ${g.count}`);
    const gpus = g.gpus ?? [];
    if ((g.kind === 'KIND_CPU' || g.kind === 'KIND_MODEL') && gpus.length > 0) {
      report(`${path}.gpus`, `a ${g.kind} group must not list gpus; remove 'gpus' or use KIND_GPU`);
    }
    gpus.forEach((id, j) => {
      if (id < 0) report(`${path}.gpus[${j}]`, `GPU id ${id} is not valid; ids start at 0`);
    });
  });
  if (config.ensemble_scheduling && (config.instance_group ?? []).length > 0) {
    report('ModelConfig.instance_group', 'an ensemble has no instances of its own; remove instance_group');
  }
}

function checkDynamicBatching(config: ModelConfig, maxBatch: number, report: Report): void {
  const db = config.dynamic_batching;
  if (!db) return;
  const path = 'ModelConfig.dynamic_batching';
  (db.preferred_batch_size ?? []).forEach((size, i) => {
    if (size < 1) report(`${path}.preferred_batch_size[${i}]`, `must be >= 1, got ${size}`);
    else if (size > maxBatch)
      report(
        `${path}.preferred_batch_size[${i}]`,
        `${size} is larger than max_batch_size ${maxBatch}; lower it or raise max_batch_size`,
      );
  });
  const levels = num(db.priority_levels);
  if (levels === 0) return;
  const def = num(db.default_priority_level);
  if (def < 1 || def > levels) {
    report(`${path}.default_priority_level`, `must be between 1 and priority_levels (${levels}), got ${def}`);
  }
  for (const level of Object.keys(db.priority_queue_policy ?? {})) {
    const n = Number(level);
    if (n < 1 || n > levels)
      report(
        `${path}.priority_queue_policy["${level}"]`,
        `priority level ${level} is outside 1..${levels} (priority_levels)`,
      );
  }
}

function checkSequenceBatching(sb: Obj, present: boolean, maxBatch: number, report: Report): void {
  if (!present) return;
  const path = 'ModelConfig.sequence_batching';
  asArray(sb.control_input).forEach((ci, i) => {
    const p = `${path}.control_input[${i}]`;
    if (!ci.name) report(`${p}.name`, 'every control input needs the name of the model input it feeds');
    const controls = asArray(ci.control);
    if (controls.length !== 1)
      report(`${p}.control`, `give exactly one control per control input, got ${controls.length}`);
    controls.forEach((c, j) => {
      const cp = `${p}.control[${j}]`;
      const kind = (c.kind as string | undefined) ?? 'CONTROL_SEQUENCE_START';
      if (kind === 'CONTROL_SEQUENCE_CORRID') {
        if (c.data_type === undefined || c.data_type === 'TYPE_INVALID')
          report(
            `${cp}.data_type`,
            'a CORRID control needs data_type TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING',
          );
        return;
      }
      const lists = ['int32_false_true', 'fp32_false_true', 'bool_false_true'].filter((k) => asArray(c[k]).length > 0);
      if (lists.length !== 1 || asArray(c[lists[0]]).length !== 2) {
        report(
          cp,
          `${kind} needs exactly one of int32_false_true, fp32_false_true or bool_false_true with two values [false, true]`,
        );
      }
    });
  });
  asArray(sb.state).forEach((s, i) => {
    const p = `${path}.state[${i}]`;
    if (!s.input_name) report(`${p}.input_name`, 'a state needs the name of the model input that receives it');
    if (!s.output_name) report(`${p}.output_name`, 'a state needs the name of the model output that produces it');
    if (s.data_type === undefined || s.data_type === 'TYPE_INVALID')
      report(`${p}.data_type`, 'a state needs a data_type');
    checkDims(asArray(s.dims) as unknown as number[], `${p}.dims`, report);
  });
  asArray(asObj(sb.oldest).preferred_batch_size).forEach((size, i) => {
    const n = num(size);
    if (n < 1 || n > maxBatch)
      report(
        `${path}.oldest.preferred_batch_size[${i}]`,
        `must be between 1 and max_batch_size (${maxBatch}), got ${n}`,
      );
  });
}

function checkEnsemble(config: ModelConfig, report: Report): void {
  const ens = config.ensemble_scheduling;
  const path = 'ModelConfig.ensemble_scheduling';
  if (!ens) {
    if (config.platform === 'ensemble') report(path, "platform 'ensemble' needs ensemble_scheduling { step [ ... ] }");
    return;
  }
  if (config.platform !== 'ensemble')
    report('ModelConfig.platform', `ensemble_scheduling needs platform: "ensemble", got '${config.platform ?? ''}'`);
  const steps = asArray(ens.step);
  if (steps.length === 0) report(`${path}.step`, 'an ensemble needs at least one step');
  steps.forEach((s, i) => {
    const p = `${path}.step[${i}]`;
    if (!s.model_name) report(`${p}.model_name`, 'every step needs the name of the model it runs');
    if (num(s.model_version) < -1)
      report(`${p}.model_version`, 'use -1 for the latest version, or a version number >= 1');
    if (Object.keys(asObj(s.input_map)).length === 0)
      report(`${p}.input_map`, 'map at least one input of the step model to an ensemble tensor');
    if (Object.keys(asObj(s.output_map)).length === 0)
      report(`${p}.output_map`, 'map at least one output of the step model to an ensemble tensor');
  });
}

function checkWarmup(config: ModelConfig, maxBatch: number, report: Report): void {
  asArray(config.model_warmup).forEach((w, i) => {
    const p = `ModelConfig.model_warmup[${i}]`;
    if (!w.name) report(`${p}.name`, 'every warmup sample needs a name');
    const batch = num(w.batch_size);
    if (maxBatch === 0 && batch > 1)
      report(
        `${p}.batch_size`,
        `the model does not batch (max_batch_size 0), so batch_size must be 0 or 1, got ${batch}`,
      );
    if (maxBatch > 0 && batch > maxBatch)
      report(`${p}.batch_size`, `${batch} is larger than max_batch_size ${maxBatch}`);
    const inputs = asObj(w.inputs);
    if (Object.keys(inputs).length === 0) report(`${p}.inputs`, 'a warmup sample needs inputs');
    for (const [name, raw] of Object.entries(inputs)) {
      const input = asObj(raw);
      const ip = `${p}.inputs["${name}"]`;
      if (input.data_type === undefined || input.data_type === 'TYPE_INVALID')
        report(`${ip}.data_type`, 'needs a data_type');
      if (input.zero_data === undefined && input.random_data === undefined && input.input_data_file === undefined) {
        report(ip, 'set one of zero_data, random_data or input_data_file');
      }
    }
  });
}
