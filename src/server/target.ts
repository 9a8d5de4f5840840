import type { EngineResponse } from '../backends/contract.js';
import type { InferRequest, InferResponse, RequestedOutput } from '../core/inference.js';
import type { Tensor } from '../core/tensor.js';
import type { Model, ModelVersion } from '../repository/model.js';
import type { ModelSpec } from '../repository/spec.js';
import type { ResolvedModel, TensorMetadata } from './api.js';
import { classify } from './classification.js';

/**
 * A resolved model version (ResolvedModel to protocols), valid while its version is READY, and how its answers are
 * shaped for the client (the config's reshape, classification, the order asked).
 */
export class Target implements ResolvedModel {
  constructor(
    readonly model: Model,
    readonly versionEntry: ModelVersion,
    readonly spec: ModelSpec,
  ) {}
  get name(): string {
    return this.model.name;
  }
  get version(): number {
    return this.versionEntry.version;
  }
  get maxBatchSize(): number {
    return this.spec.maxBatchSize;
  }
  get decoupled(): boolean {
    return this.spec.config.model_transaction_policy?.decoupled === true;
  }
  /**
   * Whether a request's CUDA slices may reach the scheduler as device tensors (the instance that runs it then
   * decides: its own device → zero copy, else a host copy; backends/device-placement.ts), or must be copied to host
   * memory at once: ensembles and sequence batchers copy and keep input data, the response cache hashes it, and a
   * decoupled model's responses are not written back to the region one by one.
   */
  get takesDeviceTensors(): boolean {
    const { spec, versionEntry } = this;
    return (
      spec.sequence === undefined &&
      spec.ensemble === undefined &&
      versionEntry.stats.cache === undefined &&
      !this.decoupled
    );
  }
  get inputs(): TensorMetadata[] {
    return [...this.spec.inputs.values()].map((t) => ({ name: t.name, datatype: t.datatype, shape: [...t.fullDims] }));
  }
  /** A version entry belongs to one load of its model: a reload or an unload replaces it. */
  get key(): object {
    return this.versionEntry;
  }
  /** Still the model a request for `name` would get (nothing was unloaded or replaced since the lookup). */
  fresh(name: string): boolean {
    return this.model.name === name && this.versionEntry.state === 'READY';
  }

  /**
   * The client's response (each of a decoupled model's too): outputs in the order asked (a decoupled response may
   * carry fewer), reshaped to the config's dims, classified when asked, with the engine's parameters.
   */
  respond(request: InferRequest, requested: readonly RequestedOutput[], r: EngineResponse): InferResponse {
    const { model, versionEntry: version, spec } = this;
    const outputs: Tensor[] = [];
    requested.forEach((req, i) => {
      let t = r.outputs[i];
      if (t === undefined) return;
      const out = spec.outputs.get(req.name);
      if (out?.reshape !== undefined) t = { ...t, shape: spec.batching ? [t.shape[0], ...out.dims] : [...out.dims] };
      if (req.classCount !== undefined && req.classCount > 0) {
        t = classify(t, req.classCount, spec.batching, spec.labels.get(req.name) as string[] | undefined);
      }
      outputs.push(t);
    });
    const response: InferResponse = { model: model.name, version: String(version.version), outputs };
    if (request.id !== undefined) response.id = request.id;
    if (r.parameters !== undefined) response.parameters = r.parameters;
    return response;
  }
}
