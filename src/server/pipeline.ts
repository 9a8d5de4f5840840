import type { InferRequest, InferResponse, Parameters, RequestedOutput } from '../core/inference.js';
import { InvalidArgError, NereidError, UnavailableError, UnsupportedError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { FailureReason } from '../core/stats.js';
import { noopObserver, type InferenceObserver } from '../metrics/observer.js';
import type { ModelVersion } from '../repository/model.js';
import type { ScheduledResult } from '../scheduler/scheduler.js';
import type { InferOptions } from './api.js';
import { cacheKey, ResponseCache, type CacheSlot } from './response-cache.js';
import type { SequenceParams } from './sequence-params.js';
import type { Target } from './target.js';
import { computeTimes, type Tracer } from './trace.js';
import type { OtelSpans, SentHook } from './trace-otel-types.js';
import { validateRequest } from './validate.js';

/**
 * The inference pipeline of one resolved request, after the facade found its model version: validate against the
 * config → the response cache (a hit answers here) → the version's scheduler → statistics, metrics observer and
 * trace → the response. The facade (server.ts) resolves, binds shared memory and counts requests in flight; the
 * ensemble scheduler's steps come through here too, as requests of their own models.
 */
export class InferencePipeline {
  readonly #cache: ResponseCache | undefined;
  readonly #tracer: Tracer;
  readonly #logger: Logger;
  /** Versions already warned about a response too large for the cache (once each). */
  readonly #tooLarge = new WeakSet<ModelVersion>();
  /** Per-request observations for latency summaries and histograms (the metrics endpoint sets it). */
  observer: InferenceObserver = noopObserver;

  constructor(opts: { cache: ResponseCache | undefined; tracer: Tracer; logger: Logger }) {
    this.#cache = opts.cache;
    this.#tracer = opts.tracer;
    this.#logger = opts.logger;
  }

  async run(
    target: Target,
    request: InferRequest,
    opts: InferOptions,
    requestStart: bigint,
    sequence: SequenceParams | undefined,
    parameters: Parameters | undefined,
  ): Promise<InferResponse> {
    const { model, versionEntry: version, spec } = target;
    const onResponse = target.decoupled ? opts.onResponse : undefined;
    if (target.decoupled && onResponse === undefined) {
      throw new UnsupportedError(
        `model '${model.name}' is decoupled and this endpoint doesn't support models with decoupled transaction policy; use gRPC ModelStreamInfer or HTTP POST /v2/models/${model.name}/generate_stream`,
      );
    }
    const checked = validateRequest(request, spec);
    const params = request.parameters ?? {};
    const scheduler = version.scheduler;
    if (!scheduler) throw new UnavailableError(`model '${model.name}' version ${version.version} is not ready`);
    let engineRequest = checked.request;
    // Device tensors carry no host data to hash (#takesDeviceTensors keeps them from cached models anyway).
    const cache = version.stats.cache === undefined || engineRequest.device !== undefined ? undefined : this.#cache;
    // Views of lent memory only where nothing keeps the outputs past the caller's write: not cached answers,
    // not sequences (implicit state), not decoupled streams.
    const views = opts.views === true && cache === undefined && sequence === undefined && onResponse === undefined;
    if (sequence !== undefined || parameters !== request.parameters || views) {
      engineRequest = { ...engineRequest, correlationId: sequence?.correlationId, parameters, viewsOk: views };
    }
    const batchSize = checked.request.batchSize;
    const started = process.hrtime.bigint();
    // OpenTelemetry mode only (undefined otherwise): sampled at the start, so an ensemble's steps know their parent.
    const spans = this.#tracer.begin(model.name, version.version, requestStart, request.trace);
    // A traced request's context goes with it: an ensemble's steps and a python model's BLS calls continue it.
    if (spans !== undefined)
      engineRequest = { ...engineRequest, trace: { ...spans.childContext(), parentId: spans.id } };
    // The key is taken before scheduling: the inputs may be moved to an engine thread.
    // The slot belongs to this load of the version: a reload or unload forgets it (see ResponseCache).
    const slot = cache?.slot(version, cacheKey(model.name, version.version, engineRequest, parameters));
    const hit = slot === undefined ? undefined : cache?.lookup(slot);
    const lookupNs = slot === undefined ? 0 : Number(process.hrtime.bigint() - started);
    let result: ScheduledResult;
    if (hit !== undefined) {
      result = { outputs: [...hit], timings: NO_TIMINGS, queueNs: 0, executedBatchSize: batchSize };
      version.stats.recordCacheHit(Number(process.hrtime.bigint() - started), lookupNs);
      spans?.end({ queueStart: started, requestEnd: process.hrtime.bigint() });
      return target.respond(request, checked.outputs, result);
    }
    try {
      result = await scheduler.enqueue(engineRequest, {
        signal: opts.signal,
        priority: uintParam(params, 'priority'),
        timeoutUs: uintParam(params, 'timeout'),
        sequence: sequence && { start: sequence.start, end: sequence.end },
        onResponse: onResponse && ((r) => onResponse(target.respond(request, checked.outputs, r))),
      });
    } catch (err) {
      version.stats.recordFailure(Number(process.hrtime.bigint() - started), failureReason(err));
      spans?.end({ queueStart: started, requestEnd: process.hrtime.bigint(), error: NereidError.from(err).message });
      throw err;
    }
    if (slot !== undefined && cache !== undefined) this.#remember(cache, slot, target, result, lookupNs);
    const totalNs = Number(process.hrtime.bigint() - started);
    version.stats.recordSuccess(batchSize, totalNs, result.queueNs, result.timings);
    this.observer.requestSucceeded(model.name, version.version, {
      totalNs,
      queueNs: result.queueNs,
      ...result.timings,
    });
    const sent =
      spans === undefined
        ? undefined
        : endSpans(spans, started, result, spec.ensemble !== undefined, opts.reportsSend === true && !onResponse);
    this.#traceFile(target, request, requestStart, started, result);
    // A decoupled request's responses went out through onResponse; what settles it is the final flag.
    if (onResponse) return target.respond(request, checked.outputs, { outputs: [] });
    return respondLeased(target, request, checked.outputs, result, sent);
  }

  /** Triton's file trace of a sampled request (its timestamps). */
  #traceFile(target: Target, request: InferRequest, requestStart: bigint, started: bigint, r: ScheduledResult): void {
    const traceId = this.#tracer.sampleFile(target.model.name);
    if (traceId === 0) return;
    this.#tracer.recordRequest(traceId, target.model.name, target.versionEntry.version, request.id, {
      requestStart,
      queueStart: started,
      queueNs: r.queueNs,
      timings: r.timings,
      computeStart: r.computeStart,
    });
  }

  /** Stores a computed answer; a response larger than the whole cache is said once per version. */
  #remember(cache: ResponseCache, slot: CacheSlot, target: Target, result: ScheduledResult, lookupNs: number): void {
    const t = process.hrtime.bigint();
    const stored = cache.insert(slot, result.outputs);
    target.versionEntry.stats.recordCacheMiss(lookupNs + Number(process.hrtime.bigint() - t));
    if (stored === 'too_large' && !this.#tooLarge.has(target.versionEntry)) {
      this.#tooLarge.add(target.versionEntry);
      this.#logger.warn(
        { model: target.model.name, version: target.version },
        `a response of model '${target.model.name}' takes ${ResponseCache.sizeOf(slot.key, result.outputs)} bytes, more than the whole response cache (${cache.capacity} bytes): it is not cached; raise --cache-config=local,size=<bytes>`,
      );
    }
  }
}

/** Triton's spans of a request done: an ensemble's compute spans are its steps'. */
function endSpans(
  spans: OtelSpans,
  queueStart: bigint,
  result: ScheduledResult,
  ensemble: boolean,
  deferRoot: boolean,
): SentHook | undefined {
  const requestEnd = process.hrtime.bigint();
  const compute = ensemble
    ? undefined
    : computeTimes(requestEnd, queueStart, result.queueNs, result.timings, result.computeStart);
  return spans.end({ queueStart, compute, requestEnd, deferRoot });
}

/**
 * The client's response. Outputs that view lent memory keep their lease on it, and a traced request's deferred
 * InferRequest span its end (`onSent`); if shaping the response fails, the lease is given back and the span ended.
 */
function respondLeased(
  target: Target,
  request: InferRequest,
  requested: readonly RequestedOutput[],
  result: ScheduledResult,
  sent: SentHook | undefined,
): InferResponse {
  if (result.lease === undefined && sent === undefined) return target.respond(request, requested, result);
  try {
    const response = target.respond(request, requested, result);
    if (result.lease !== undefined) response.lease = result.lease;
    if (sent !== undefined) response.onSent = sent;
    return response;
  } catch (err) {
    result.lease?.release();
    const now = process.hrtime.bigint();
    sent?.(now, now);
    throw err;
  }
}

const NO_TIMINGS = Object.freeze({ computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 });

function uintParam(params: Parameters, key: string): number | undefined {
  const v = params[key];
  if (v === undefined) return undefined;
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
    throw new InvalidArgError(`parameter '${key}' must be a non-negative integer, got ${JSON.stringify(String(v))}`);
  }
  return n;
}

/** Triton's failure reasons for `nv_inference_request_failure`. */
function failureReason(err: unknown): FailureReason {
  const code = NereidError.from(err).code;
  if (code === 'CANCELLED') return 'CANCELED';
  if (code === 'UNAVAILABLE') return 'REJECTED';
  if (code === 'INTERNAL' || code === 'INVALID_ARG') return 'BACKEND';
  return 'OTHER';
}
