import type * as grpc from '@grpc/grpc-js';
import { CancelledError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { InferResponse, RequestTrace } from '../../core/inference.js';
import type { InferenceServerApi } from '../../server/api.js';
import { withForwardedMetadata } from './forward.js';
import { decodeModelInferRequest } from './infer-request.js';
import { encodeModelInferResponse } from './infer-response.js';
import type { ModelInferRequestMsg, ModelInferResponseMsg, ModelStreamInferResponseMsg } from './messages.js';
import { callStatus, errorMessage, toStatus } from './status.js';
import { lendTo, releaseLent } from './lent-response.js';
import { rejectMalformed } from './malformed.js';
import { StreamBudget, type StreamLimits } from '../kserve/stream-budget.js';
import { header, requestTrace } from '../kserve/trace-context.js';

type AnyCall = grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>;

/**
 * One AbortSignal for a call: client cancellation (RST_STREAM, disconnect) and the client's deadline both
 * abort it, so the scheduler drops a request still queued and skips work nobody waits for. grpc-js answers
 * DEADLINE_EXCEEDED itself; our own timer only makes sure the work stops too. `dispose` removes both.
 */
export function callSignal(call: AnyCall): { signal: AbortSignal; abort(reason: Error): void; dispose(): void } {
  const controller = new AbortController();
  const onCancel = (): void => controller.abort(new CancelledError('request was cancelled by the client'));
  call.on('cancelled', onCancel);
  let timer: NodeJS.Timeout | undefined;
  const deadline = call.getDeadline();
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  if (Number.isFinite(at)) {
    timer = setTimeout(
      () => controller.abort(new CancelledError('the client deadline was exceeded')),
      Math.max(0, at - Date.now()),
    );
    timer.unref();
  }
  return {
    signal: controller.signal,
    abort: (reason) => controller.abort(reason),
    dispose() {
      call.off('cancelled', onCancel);
      if (timer) clearTimeout(timer);
    },
  };
}

/** Limits of the inference rpcs. */
export interface InferLimits {
  /** `--max-response-bytes`. */
  maxResponseBytes: number;
  /**
   * `--grpc-max-response-pool-size`: per ModelStreamInfer stream, how many responses may be pending (running, or
   * done and not yet taken by the client) before the server stops reading the stream's requests.
   */
  maxResponsePoolSize: number;
  /** `--stream-max-pending-bytes`, `--stream-stall-timeout-secs` (kserve/stream-budget.ts). */
  stream: StreamLimits;
  /** `--grpc-header-forward-pattern`, compiled (forward.ts). */
  headerForward?: RegExp;
}

/** What a stream's response holds until the transport takes it: its raw contents (the bulk of any response). */
function heldBytes(msg: ModelInferResponseMsg): number {
  let n = 64;
  for (const raw of msg.raw_output_contents ?? []) n += raw.byteLength;
  return n;
}

/** The client's W3C trace context rides in the call's metadata (`traceparent`, `tracestate`). */
function metadataTrace(recvStart: bigint, metadata: grpc.Metadata): RequestTrace {
  return requestTrace('GRPC', recvStart, header(metadata.get('traceparent')[0]), header(metadata.get('tracestate')[0]));
}

/** Where a unary call learns the hook that ends its traced request with the send (InferResponse.onSent). */
interface SentHolder {
  onSent?: (sendStart: bigint, sendEnd: bigint) => void;
}

/** Decode, run, encode. The model is looked up first so an unknown model wins over a malformed body, as in Triton. */
async function inferOnce(
  api: InferenceServerApi,
  msg: ModelInferRequestMsg,
  signal: AbortSignal,
  limits: InferLimits,
  trace: { recvStart: bigint; metadata: grpc.Metadata },
  sent?: SentHolder,
): Promise<ModelInferResponseMsg> {
  rejectMalformed(msg);
  const resolved = api.checkModel(msg.model_name, msg.model_version === '' ? undefined : msg.model_version);
  const request = decodeModelInferRequest(msg);
  request.trace = metadataTrace(trace.recvStart, trace.metadata);
  // Views: the raw contents may stay in the engine's memory until grpc-js serialized them (lent-response.ts).
  const response = await api.infer(request, { signal, resolved, views: true, reportsSend: sent !== undefined });
  if (sent !== undefined && response.onSent !== undefined) sent.onSent = response.onSent;
  try {
    const encoded = encodeModelInferResponse(response, limits.maxResponseBytes);
    if (response.lease !== undefined) lendTo(encoded, response.lease);
    return encoded;
  } catch (err) {
    response.lease?.release();
    if (sent?.onSent !== undefined) {
      const now = process.hrtime.bigint();
      sent.onSent(now, now);
      sent.onSent = undefined;
    }
    throw err;
  }
}

/** ModelInfer: one request, one response or a status. */
export function modelInfer(
  api: InferenceServerApi,
  logger: Logger,
  limits: InferLimits,
): grpc.handleUnaryCall<unknown, unknown> {
  return (call, callback) => {
    const recvStart = process.hrtime.bigint();
    const { signal, dispose } = callSignal(call);
    const msg = withForwardedMetadata(call.request as ModelInferRequestMsg, call.metadata, limits.headerForward);
    // A traced request's InferRequest span ends with the answer's hand-off to grpc-js (GRPC_SEND_START/END).
    const sent: SentHolder = {};
    inferOnce(api, msg, signal, limits, { recvStart, metadata: call.metadata }, sent).then(
      (resp) => {
        dispose();
        const sendStart = process.hrtime.bigint();
        callback(null, resp);
        // A call cancelled before its answer was serialized never serializes it: its lease goes back here, or at
        // the 'cancelled' grpc-js emits when the call's stream closes (after a sent answer too).
        if (call.cancelled) releaseLent(resp);
        else call.once('cancelled', () => releaseLent(resp));
        sent.onSent?.(sendStart, process.hrtime.bigint());
      },
      (err: unknown) => {
        dispose();
        callback(callStatus(call, err, logger, 'ModelInfer'));
      },
    );
  };
}

/**
 * ModelStreamInfer: requests run as they arrive; responses are written in request order (Triton keeps that
 * order for non-decoupled models, and clients that do not match ids rely on it). A failed request answers
 * with `error_message` and the stream goes on, unless the client sent `triton_grpc_error: true`, which asks
 * for the stream to end with the error's status instead. The stream ends once the client has half-closed
 * and every response is written; a cancelled stream aborts all its requests.
 *
 * Backpressure: a request counts as pending from the moment it is read until its response has been handed to the
 * transport and the transport took it (its `write` returned true, or `drain` came). While `maxResponsePoolSize`
 * requests are pending the stream is paused: no more requests are read, so HTTP/2 flow control stops a client that
 * sends without reading (before, 60 requests of 47 bytes whose responses nobody read held 1 GB). Reading also
 * stops while half of `--stream-max-pending-bytes` is pending. A decoupled model's responses are each pending until
 * taken too, and the model's sender waits meanwhile (the promise `onResponse` returns). Past the stream's limits
 * (StreamBudget: bytes, count, or nothing taken for the stall timeout) the stream ends with RESOURCE_EXHAUSTED and
 * its requests are cancelled.
 */
export function modelStreamInfer(
  api: InferenceServerApi,
  logger: Logger,
  limits: InferLimits,
): grpc.handleBidiStreamingCall<unknown, unknown> {
  return (call) => {
    const stream = new InferStream(api, logger, limits, call);
    call.on('data', (msg: ModelInferRequestMsg) =>
      stream.request(withForwardedMetadata(msg, call.metadata, limits.headerForward)),
    );
    call.on('end', () => stream.end());
    call.on('cancelled', () => stream.dispose());
    call.on('error', () => stream.disposeSignal());
  };
}

/**
 * One ModelStreamInfer call: the order of its responses (`tail`), its backpressure (`pending`, `budget`) and
 * whether it has failed. A class rather than closures in modelStreamInfer so each step is a method of its own;
 * the per-request work allocates what the closures did.
 */
class InferStream {
  readonly signal: AbortSignal;
  /** The stream's metadata: its W3C trace context applies to each of its requests. */
  get metadata(): grpc.Metadata {
    return this.#call.metadata;
  }
  readonly budget: StreamBudget;
  readonly #api: InferenceServerApi;
  readonly #logger: Logger;
  readonly #limits: InferLimits;
  readonly #call: grpc.ServerDuplexStream<unknown, unknown>;
  readonly #dispose: () => void;
  readonly #endOnError: boolean;
  #tail: Promise<void> = Promise.resolve();
  #failed = false;
  #pending = 0;
  /** Decoupled requests still answering; the stream ends only after them. */
  readonly #answering = new Set<Promise<void>>();
  /** A request's response was handed over (or failed): bound once, chained per request. */
  readonly #settled = (): void => {
    this.#pending--;
    if (!this.#full() && this.#call.isPaused()) this.#call.resume();
  };

  constructor(
    api: InferenceServerApi,
    logger: Logger,
    limits: InferLimits,
    call: grpc.ServerDuplexStream<unknown, unknown>,
  ) {
    this.#api = api;
    this.#logger = logger;
    this.#limits = limits;
    this.#call = call;
    const { signal, abort, dispose } = callSignal(call);
    this.signal = signal;
    this.#dispose = dispose;
    this.#endOnError = call.metadata.get('triton_grpc_error')[0] === 'true';
    this.budget = new StreamBudget(limits.stream, (err) => {
      logger.warn(`gRPC ModelStreamInfer: ${err.message}; ending the stream with RESOURCE_EXHAUSTED`);
      if (!this.#failed && !signal.aborted) call.emit('error', toStatus(err, logger, 'ModelStreamInfer'));
      this.#failed = true;
      abort(err);
    });
  }

  #full(): boolean {
    return (
      this.#pending >= this.#limits.maxResponsePoolSize ||
      this.budget.pendingBytes >= this.#limits.stream.maxPendingBytes / 2
    );
  }

  /** Writes `msg`; `held` bytes given to the budget are taken once the transport took the message. */
  write(msg: ModelStreamInferResponseMsg, held?: number): Promise<void> {
    return new Promise((resolve) => {
      const took = (): void => {
        if (held !== undefined) this.budget.took(held);
        resolve();
      };
      if (this.signal.aborted || this.#failed || this.#call.write(msg)) return took();
      // Backpressure: wait until the client reads before writing the next response.
      const done = (): void => {
        this.#call.off('drain', done);
        this.signal.removeEventListener('abort', done);
        took();
      };
      this.#call.once('drain', done);
      this.signal.addEventListener('abort', done, { once: true });
    });
  }

  /** A failed request: `error_message` on the stream, or the stream's end with the status (`triton_grpc_error`). */
  async report(err: unknown): Promise<void> {
    if (this.#failed || this.signal.aborted) return;
    if (this.#endOnError) {
      this.#failed = true;
      this.#call.emit('error', toStatus(err, this.#logger, 'ModelStreamInfer'));
      return;
    }
    await this.write({ error_message: errorMessage(err, this.#logger, 'ModelStreamInfer'), infer_response: null });
  }

  /** Runs `job` after every job queued before it: responses go out in request order. */
  queue(job: () => Promise<void>): void {
    this.#tail = this.#tail
      .then(job)
      .catch((err: unknown) => this.#logger.error({ err }, 'gRPC ModelStreamInfer: writing a response failed'));
  }

  request(msg: ModelInferRequestMsg): void {
    let decoupled = false;
    try {
      decoupled = this.#api.checkModel(
        msg.model_name,
        msg.model_version === '' ? undefined : msg.model_version,
      ).decoupled;
    } catch {
      // inferOnce reports the lookup failure in order.
    }
    if (decoupled) {
      const done = streamDecoupled(this.#api, msg, this);
      this.#answering.add(done);
      void done.finally(() => this.#answering.delete(done));
      return;
    }
    // Backpressure: stop reading requests while the client has this many responses not yet taken.
    this.#pending++;
    if (this.#full()) this.#call.pause();
    const trace = { recvStart: process.hrtime.bigint(), metadata: this.#call.metadata };
    const running = inferOnce(this.#api, msg, this.signal, this.#limits, trace).then(
      (infer_response): ModelStreamInferResponseMsg => ({ error_message: '', infer_response }),
      (err: unknown) => ({ err }),
    );
    this.queue(async () => {
      const result = await running;
      if (this.#failed || this.signal.aborted) return;
      if ('err' in result) return this.report(result.err);
      const held = heldBytes(result.infer_response!);
      if (this.budget.add(held)) await this.write(result, held);
      if (this.#full()) this.#call.pause();
    });
    this.#tail = this.#tail.finally(this.#settled);
  }

  /** The client half-closed: end the stream once every response is written. */
  end(): void {
    // tail never rejects (each write's failure is caught and logged above), so nothing is dropped here.
    void Promise.all(this.#answering)
      .then(() => this.#tail)
      .then(() => {
        this.dispose();
        if (!this.#failed && !this.signal.aborted) this.#call.end();
      });
  }

  dispose(): void {
    this.#dispose();
    this.budget.dispose();
  }

  disposeSignal(): void {
    this.#dispose();
  }
}

/**
 * One request to a decoupled model on a stream: each response is written as the model sends it (after whatever
 * the stream queued before it); with `triton_enable_empty_final_response` every response says whether it is the
 * last (`triton_final_response`) and an empty final response closes the request, as Triton does. Each response is
 * pending in the stream's budget until written; the promise given back to the model's sender settles then.
 */
async function streamDecoupled(
  api: InferenceServerApi,
  msg: ModelInferRequestMsg,
  stream: Pick<InferStream, 'signal' | 'budget' | 'queue' | 'write' | 'report' | 'metadata'>,
): Promise<void> {
  const flagFinal = msg.parameters?.triton_enable_empty_final_response?.bool_param === true;
  const emit = (resp: InferResponse, final: boolean): Promise<void> | undefined => {
    const r = flagFinal ? { ...resp, parameters: { ...resp.parameters, triton_final_response: final } } : resp;
    const encoded = encodeModelInferResponse(r);
    const held = heldBytes(encoded);
    if (!stream.budget.add(held)) return undefined;
    return new Promise((taken) =>
      stream.queue(() => stream.write({ error_message: '', infer_response: encoded }, held).then(taken)),
    );
  };
  try {
    const request = decodeModelInferRequest(msg);
    request.trace = metadataTrace(process.hrtime.bigint(), stream.metadata);
    const last = await api.infer(request, { signal: stream.signal, onResponse: (r) => emit(r, false) });
    if (flagFinal) void emit(last, true);
  } catch (err) {
    stream.queue(() => stream.report(err));
  }
}
