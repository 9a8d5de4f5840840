import type { ModelConfig, ModelInstanceGroup } from '../config/model-config.js';
import { InvalidArgError, UnsupportedError } from '../core/errors.js';
import type {
  Backend,
  BackendDescriptor,
  ConfigSection,
  InstanceKind,
  InstanceRateLimit,
  InstanceSpec,
} from './contract.js';

/**
 * The backends a server offers and the engine facts the repository needs without loading anything: which
 * backend serves a platform or a default file name, which config sections it supports, and the expansion of
 * `instance_group` into instances (done once, here, for every backend).
 */

/** Sections present in a config (those an engine or scheduler must support to honour them). */
function sectionsIn(config: ModelConfig): ConfigSection[] {
  const found: ConfigSection[] = [];
  if (config.sequence_batching) found.push('sequence_batching');
  if (config.ensemble_scheduling) found.push('ensemble_scheduling');
  if ((config.model_warmup?.length ?? 0) > 0) found.push('model_warmup');
  if (config.response_cache?.enable) found.push('response_cache');
  if (config.model_transaction_policy?.decoupled) found.push('decoupled');
  if ((config.batch_input?.length ?? 0) > 0) found.push('batch_input');
  if ((config.batch_output?.length ?? 0) > 0) found.push('batch_output');
  if (hasAgents(config.model_repository_agents)) found.push('model_repository_agents');
  return found;
}

/**
 * Sections the schedulers implement for every backend: the engine only ever sees plain requests (the sequence
 * batcher adds control and state tensors, the ensemble scheduler runs other models, warm-up and the response
 * cache sit in front of the scheduler).
 */
export const SCHEDULER_SECTIONS: readonly ConfigSection[] = Object.freeze([
  'sequence_batching',
  'ensemble_scheduling',
  'model_warmup',
  'response_cache',
]);

function hasAgents(section: unknown): boolean {
  const agents = (section as { agents?: unknown[] } | undefined)?.agents;
  return Array.isArray(agents) && agents.length > 0;
}

export class BackendRegistry {
  readonly #backends: readonly Backend[];
  readonly #gpus: readonly number[];

  /** `gpus`: ids of the GPUs usable on this machine (empty without one). */
  constructor(backends: readonly Backend[], opts: { gpus?: readonly number[] } = {}) {
    this.#backends = backends;
    this.#gpus = opts.gpus ?? [];
  }

  get names(): string[] {
    return this.#backends.map((b) => b.name);
  }

  /** The usable GPUs' ids (empty on a machine without one). */
  get gpus(): readonly number[] {
    return this.#gpus;
  }

  get all(): readonly Backend[] {
    return this.#backends;
  }

  get(name: string): Backend | undefined {
    return this.#backends.find((b) => b.name === name);
  }

  byPlatform(platform: string): Backend | undefined {
    return this.#backends.find((b) => b.platforms.includes(platform));
  }

  /** Backends whose model file (default name, or the config's `default_model_filename`) is among `files`. */
  sniff(files: ReadonlySet<string>, defaultModelFilename?: string): Backend[] {
    return this.#backends.filter(
      (b) => b.defaultModelFilename !== '' && files.has(defaultModelFilename ?? b.defaultModelFilename),
    );
  }

  /** A config section that neither the backend nor the schedulers support fails the load, naming it. */
  checkSections(config: ModelConfig, backend: Pick<BackendDescriptor, 'name' | 'sections'>, modelName: string): void {
    for (const section of sectionsIn(config)) {
      if (!backend.sections.includes(section) && !SCHEDULER_SECTIONS.includes(section)) {
        throw new UnsupportedError(
          `model '${modelName}': config section '${section}' is not supported by Nereid's '${backend.name}' backend yet; remove it from config.pbtxt`,
        );
      }
    }
  }

  /**
   * Triton's KIND_AUTO: GPU when the backend can use one now (it lists KIND_GPU first: e.g. onnxruntime with its
   * CUDA provider installed) and the machine has one, else CPU.
   */
  resolveKind(kind: ModelInstanceGroup['kind'], backend: Pick<Backend, 'kinds'>): InstanceKind {
    if (kind === undefined || kind === 'KIND_AUTO') {
      return backend.kinds[0] === 'KIND_GPU' && this.#gpus.length > 0 ? 'KIND_GPU' : 'KIND_CPU';
    }
    return kind;
  }

  /**
   * The instances of a normalized config, in group order: `count` per group, and for KIND_GPU `count` on each
   * listed GPU (all GPUs when the group lists none). Names `<model>_<n>`, numbered across groups.
   */
  expandInstances(config: ModelConfig, modelName: string, backend: Backend): InstanceSpec[] {
    const specs: InstanceSpec[] = [];
    for (const [i, g] of (config.instance_group ?? []).entries()) {
      const kind = this.resolveKind(g.kind, backend);
      if (!backend.kinds.includes(kind)) {
        throw new UnsupportedError(
          kind === 'KIND_GPU'
            ? `model '${modelName}': instance_group[${i}] is KIND_GPU, but the '${backend.name}' backend of this build runs on CPU only; use KIND_CPU`
            : `model '${modelName}': instance_group[${i}] kind ${kind} is not supported by the '${backend.name}' backend`,
        );
      }
      const count = g.count ?? 1;
      let devices = [-1];
      if (kind === 'KIND_GPU') {
        devices = g.gpus && g.gpus.length > 0 ? g.gpus : [...this.#gpus];
        if (devices.length === 0) {
          throw new InvalidArgError(
            `model '${modelName}': instance_group[${i}] is KIND_GPU, but no GPU is usable on this machine (no NVIDIA driver or CUDA device found); use KIND_CPU or KIND_AUTO`,
          );
        }
        const unknown = devices.filter((d) => !this.#gpus.includes(d));
        if (unknown.length > 0) {
          throw new InvalidArgError(
            `model '${modelName}': instance_group[${i}] lists GPU ${unknown.join(', ')}, but this machine has ${this.#gpus.length === 0 ? 'no GPU' : `GPUs ${this.#gpus.join(', ')}`}`,
          );
        }
      }
      for (const device of devices) {
        for (let k = 0; k < count; k++) {
          specs.push({
            name: `${modelName}_${specs.length}`,
            index: specs.length,
            kind,
            device,
            profiles: [...(g.profile ?? [])],
            rateLimiter: rateLimitOf(g.rate_limiter),
          });
        }
      }
    }
    if (specs.length === 0)
      throw new InvalidArgError(`model '${modelName}': instance_group gives 0 instances; set count >= 1`);
    return specs;
  }

  async close(): Promise<void> {
    await Promise.all(this.#backends.map((b) => b.close?.() ?? Promise.resolve()));
  }
}

/** An instance group's `rate_limiter` as its instances carry it (undefined when the group has none). */
function rateLimitOf(r: ModelInstanceGroup['rate_limiter']): InstanceRateLimit | undefined {
  if (r === undefined) return undefined;
  const resources = (r.resources ?? []).map((x) => ({
    name: x.name ?? '',
    global: x.global === true,
    count: x.count ?? 0,
  }));
  return { resources, priority: r.priority ?? 0 };
}
