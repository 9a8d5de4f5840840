import type { ModelConfig } from '../config/model-config.js';
import { dataTypeFromConfig, type DataType } from '../core/datatypes.js';
import { InvalidArgError, UnavailableError } from '../core/errors.js';
import {
  buildEnsembleGraph,
  checkComposing,
  type ComposingModel,
  type EnsembleGraph,
} from '../scheduler/ensemble/graph.js';
import { latestReady, type Model } from './model.js';

/**
 * What an ensemble's load needs beyond its config: its composing models, loaded first (Triton's dependency
 * order). An ensemble is READY only while every composing model it names is READY.
 */

export interface EnsembleDeps {
  /**
   * The composing model `name` once its pending load (if any) has finished; in explicit mode a model found in the
   * repositories but never loaded is loaded now. Undefined when no repository has it. Throws when waiting would
   * close a cycle of ensembles.
   */
  dependency(name: string, ensemble: string): Promise<Model | undefined>;
}

/** The graph of an ensemble config, checked against its composing models (which are awaited). */
export async function prepareEnsemble(config: ModelConfig, deps: EnsembleDeps): Promise<EnsembleGraph> {
  const name = config.name as string;
  if ((config.model_warmup?.length ?? 0) > 0) {
    throw new InvalidArgError(`model_warmup can not be specified for ensemble '${name}'`);
  }
  const graph = buildEnsembleGraph(config);
  const composing = new Map<string, ComposingModel>();
  for (const m of graph.models) {
    if (m === name) throw new InvalidArgError(`ensemble '${name}' has a cycle: it lists itself as a step`);
    const model = await deps.dependency(m, name);
    if (model === undefined) {
      throw new InvalidArgError(
        `ensemble '${name}' contains models that are not available: '${m}' is not in any model repository`,
      );
    }
    const reason = notServing(graph, model);
    if (reason !== '' || model.spec === undefined) {
      throw new UnavailableError(`ensemble '${name}' depends on '${m}', which is not ready: ${reason}`);
    }
    composing.set(m, model.spec);
  }
  const types = new Map<string, DataType>();
  for (const t of [...(config.input ?? []), ...(config.output ?? [])]) {
    const dt = dataTypeFromConfig(t.data_type ?? 'TYPE_INVALID');
    if (dt !== undefined) types.set(t.name as string, dt);
  }
  checkComposing(graph, composing, types);
  return graph;
}

/** Why a composing model cannot serve the versions the graph asks of it ('' when it can). */
export function notServing(graph: EnsembleGraph, model: Model): string {
  for (const s of graph.steps) {
    if (s.model !== model.name) continue;
    if (s.version > 0) {
      const v = model.versions.get(s.version);
      if (v?.state !== 'READY')
        return `version ${s.version} is ${v ? `${v.state}${v.reason ? ` (${v.reason})` : ''}` : 'not loaded'}`;
    } else if (latestReady(model) === undefined) {
      return model.reason || 'no version is ready';
    }
  }
  return '';
}
