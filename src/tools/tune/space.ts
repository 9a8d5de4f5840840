/**
 * The config space `nereid tune` searches: one dimension per knob (instances, max_batch_size, dynamic batching,
 * per-backend thread options), each a short list of settings whose first entry is "as the config has it". A
 * candidate is one choice per dimension; all zeros is the default config, so the search always measures it.
 */
import type { ModelConfig, ModelInstanceGroup } from '../../config/model-config.js';

/** One value of a knob: a label for the report and the change it makes to a config. */
export interface Setting {
  label: string;
  apply(config: ModelConfig): ModelConfig;
  /** Runs after every dimension's `apply`: for a setting that depends on another's (preferred sizes on the batch). */
  finish?(config: ModelConfig): ModelConfig;
}

export interface Dimension {
  name: string;
  settings: Setting[];
}

/** A point of the space: one setting index per dimension, in `Space.dimensions` order. */
export type Choice = readonly number[];

export interface Space {
  dimensions: Dimension[];
}

export interface SpaceOptions {
  /** CPU cores of this machine: bounds instance and thread counts. */
  cores: number;
  /** Instance kinds to try: `KIND_CPU`, `KIND_GPU` (on every GPU listed in `gpus`). */
  kinds?: ('KIND_CPU' | 'KIND_GPU')[];
  gpus?: number[];
  /** Instance counts to try (default 1, 2, 4 … up to the cores). */
  instanceCounts?: number[];
}

const unchanged: Setting = { label: 'as configured', apply: (c) => c };

/** Instance counts 1, 2, 4 … up to the cores, per kind asked for. */
function instanceDimension(base: ModelConfig, o: SpaceOptions): Dimension {
  const counts: number[] = [...(o.instanceCounts ?? [])];
  if (counts.length === 0) for (let n = 1; n <= Math.max(2, o.cores); n *= 2) counts.push(n);
  const kinds = o.kinds ?? [baseKind(base)];
  const settings: Setting[] = [unchanged];
  for (const kind of kinds) {
    for (const count of counts) {
      const group: ModelInstanceGroup = { kind, count };
      if (kind === 'KIND_GPU' && o.gpus !== undefined && o.gpus.length > 0) group.gpus = [...o.gpus];
      const where = kind === 'KIND_GPU' ? `GPU${group.gpus ? ` ${group.gpus.join(',')}` : ''}` : 'CPU';
      settings.push({ label: `${count}×${where}`, apply: (c) => ({ ...c, instance_group: [{ ...group }] }) });
    }
  }
  return { name: 'instances', settings };
}

function baseKind(base: ModelConfig): 'KIND_CPU' | 'KIND_GPU' {
  return base.instance_group?.some((g) => g.kind === 'KIND_GPU') ? 'KIND_GPU' : 'KIND_CPU';
}

/** Batching knobs exist only for a model that batches (max_batch_size > 0). */
function batchingDimensions(base: ModelConfig): Dimension[] {
  const mbs = base.max_batch_size ?? 0;
  if (mbs <= 0) return [];
  const sizes = [...new Set([mbs, Math.max(1, mbs >> 1), mbs * 2])];
  const maxBatch: Dimension = {
    name: 'max_batch_size',
    settings: [
      unchanged,
      ...sizes.slice(1).map((n) => ({ label: String(n), apply: (c: ModelConfig) => ({ ...c, max_batch_size: n }) })),
    ],
  };
  const dynamic = (label: string, delay: number, preferred?: boolean): Setting => ({
    label,
    apply: (c) => ({ ...c, dynamic_batching: { max_queue_delay_microseconds: delay } }),
    // Preferred sizes from the final max_batch_size (that dimension applies after this one).
    finish: preferred
      ? (c) => {
          const size = c.max_batch_size ?? mbs;
          const preferredSizes = [...new Set([Math.max(1, size >> 1), size])];
          return { ...c, dynamic_batching: { ...c.dynamic_batching, preferred_batch_size: preferredSizes } };
        }
      : undefined,
  });
  const off: Setting = {
    label: 'off',
    apply: (c) => {
      const { dynamic_batching: _, ...rest } = c;
      return rest;
    },
  };
  const batching: Dimension = {
    name: 'dynamic_batching',
    settings: [
      unchanged,
      base.dynamic_batching ? off : dynamic('on, delay 0µs', 0),
      dynamic('on, delay 100µs', 100),
      dynamic('on, delay 500µs, preferred', 500, true),
    ],
  };
  return [batching, maxBatch];
}

/** A string parameter of the config (`parameters { key: … value { string_value: … } }`). */
function withParameter(c: ModelConfig, key: string, value: string): ModelConfig {
  return { ...c, parameters: { ...c.parameters, [key]: { string_value: value } } };
}

/** The backend's own threads: onnxruntime's intra-op pool, PyTorch's intra/inter-op threads. */
function backendDimensions(base: ModelConfig, o: SpaceOptions): Dimension[] {
  const backend = base.backend || (base.platform?.startsWith('onnxruntime') ? 'onnxruntime' : base.platform) || '';
  const threads = [...new Set([1, Math.max(1, o.cores)])];
  const param = (key: string): Dimension => ({
    name: key,
    settings: [
      unchanged,
      ...threads.map((n) => ({ label: String(n), apply: (c: ModelConfig) => withParameter(c, key, String(n)) })),
    ],
  });
  if (backend === 'onnxruntime') return [param('intra_op_thread_count')];
  if (backend === 'pytorch' || backend === 'pytorch_libtorch') return [param('INTRA_OP_THREAD_COUNT')];
  return [];
}

/** The space of `base`, its dimensions in the order the quick search walks them (the biggest effect first). */
export function buildSpace(base: ModelConfig, o: SpaceOptions): Space {
  return { dimensions: [instanceDimension(base, o), ...batchingDimensions(base), ...backendDimensions(base, o)] };
}

/** The config a choice stands for. */
export function configOf(space: Space, base: ModelConfig, choice: Choice): ModelConfig {
  const settings = space.dimensions.map((d, i) => d.settings[choice[i] ?? 0]);
  const applied = settings.reduce((c, s) => s.apply(c), base);
  return settings.reduce((c, s) => s.finish?.(c) ?? c, applied);
}

/** The changes a choice makes, as `dimension=label` (empty for the default). */
export function describeChoice(space: Space, choice: Choice): string {
  const parts = space.dimensions.flatMap((d, i) =>
    (choice[i] ?? 0) === 0 ? [] : [`${d.name}=${d.settings[choice[i]].label}`],
  );
  return parts.length === 0 ? 'default' : parts.join(', ');
}

export function defaultChoice(space: Space): Choice {
  return space.dimensions.map(() => 0);
}

/** Every candidate of the exhaustive search, the default first. */
export function allChoices(space: Space): Choice[] {
  let out: number[][] = [[]];
  for (const d of space.dimensions) out = out.flatMap((prefix) => d.settings.map((_, i) => [...prefix, i]));
  return out;
}

/** The quick search's candidates along one dimension from `current`: its other settings, the rest unchanged. */
export function alongDimension(space: Space, current: Choice, dim: number): Choice[] {
  const d = space.dimensions[dim];
  return d.settings.flatMap((_, i) => (i === current[dim] ? [] : [current.map((v, j) => (j === dim ? i : v))]));
}

export const choiceKey = (choice: Choice): string => choice.join('.');
