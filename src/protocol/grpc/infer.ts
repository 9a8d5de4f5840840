import type * as grpc from '@grpc/grpc-js';
import { CancelledError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { InferResponse } from '../../core/inference.js';
import type { InferenceServerApi } from '../../server/api.js';
import { decodeModelInferRequest } from './infer-request.js';
import { encodeModelInferResponse } from './infer-response.js';
import type { ModelInferRequestMsg, ModelInferResponseMsg, ModelStreamInferResponseMsg } from './messages.js';
import { errorMessage, toStatus } from './status.js';
import { rejectMalformed } from './malformed.js';

type AnyCall = grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>;

/**
 * One AbortSignal for a call: client cancellation (RST_STREAM, disconnect) and the client's deadline both
 * abort it, so the scheduler drops a request still queued and skips work nobody waits for. grpc-js answers
 * DEADLINE_EXCEEDED itself; our own timer only makes sure the work stops too. `dispose` removes both.
 */
export function callSignal(call: AnyCall): { signal: AbortSignal; dispose(): void } {
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
}

/** Decode, run, encode. The model is looked up first so an unknown model wins over a malformed body, as in Triton. */
async function inferOnce(
  api: InferenceServerApi,
  msg: ModelInferRequestMsg,
  signal: AbortSignal,
  limits: InferLimits,
): Promise<ModelInferResponseMsg> {
  rejectMalformed(msg);
  const resolved = api.checkModel(msg.model_name, msg.model_version === '' ? undefined : msg.model_version);
  const request = decodeModelInferRequest(msg);
  return encodeModelInferResponse(await api.infer(request, { signal, resolved }), limits.maxResponseBytes);
}

/** ModelInfer: one request, one response or a status. */
export function modelInfer(
  api: InferenceServerApi,
  logger: Logger,
  limits: InferLimits,
): grpc.handleUnaryCall<unknown, unknown> {
  return (call, callback) => {
    const { signal, dispose } = callSignal(call);
    inferOnce(api, call.request as ModelInferRequestMsg, signal, limits).then(
      (resp) => {
        dispose();
        callback(null, resp);
      },
      (err: unknown) => {
        dispose();
        callback(toStatus(err, logger, 'ModelInfer'));
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
 * sends without reading (before, 60 requests of 47 bytes whose responses nobody read held 1 GB).
 */
export function modelStreamInfer(
  api: InferenceServerApi,
  logger: Logger,
  limits: InferLimits,
): grpc.handleBidiStreamingCall<unknown, unknown> {
  return (call) => {
    const { signal, dispose } = callSignal(call);
    const endOnError = call.metadata.get('triton_grpc_error')[0] === 'true';
    let tail: Promise<void> = Promise.resolve();
    let failed = false;
    let pending = 0;
    const settled = (): void => {
      pending--;
      if (pending < limits.maxResponsePoolSize && call.isPaused()) call.resume();
    };

    const write = (msg: ModelStreamInferResponseMsg): Promise<void> =>
      new Promise((resolve) => {
        if (signal.aborted || failed || call.write(msg)) return resolve();
        // Backpressure: wait until the client reads before writing the next response.
        const done = (): void => {
          call.off('drain', done);
          signal.removeEventListener('abort', done);
          resolve();
        };
        call.once('drain', done);
        signal.addEventListener('abort', done, { once: true });
      });

    /** Decoupled requests still answering; the stream ends only after them. */
    const answering = new Set<Promise<void>>();
    const report = async (err: unknown): Promise<void> => {
      if (failed || signal.aborted) return;
      if (endOnError) {
        failed = true;
        call.emit('error', toStatus(err, logger, 'ModelStreamInfer'));
        return;
      }
      await write({ error_message: errorMessage(err, logger, 'ModelStreamInfer'), infer_response: null });
    };
    const queue = (job: () => Promise<void>): void => {
      tail = tail
        .then(job)
        .catch((err: unknown) => logger.error({ err }, 'gRPC ModelStreamInfer: writing a response failed'));
    };

    call.on('data', (msg: ModelInferRequestMsg) => {
      let decoupled = false;
      try {
        decoupled = api.checkModel(msg.model_name, msg.model_version === '' ? undefined : msg.model_version).decoupled;
      } catch {
        // inferOnce reports the lookup failure in order.
      }
      if (decoupled) {
        const done = streamDecoupled(api, msg, signal, queue, write, report);
        answering.add(done);
        void done.finally(() => answering.delete(done));
        return;
      }
      // Backpressure: stop reading requests while the client has this many responses not yet taken.
      if (++pending >= limits.maxResponsePoolSize) call.pause();
      const running = inferOnce(api, msg, signal, limits).then(
        (infer_response): ModelStreamInferResponseMsg => ({ error_message: '', infer_response }),
        (err: unknown) => ({ err }),
      );
      queue(async () => {
        const result = await running;
        if (failed || signal.aborted) return;
        if ('err' in result) await report(result.err);
        else await write(result);
      });
      tail = tail.finally(settled);
    });
    call.on('end', () => {
      // tail never rejects (each write's failure is caught and logged above), so nothing is dropped here.
      void Promise.all(answering)
        .then(() => tail)
        .then(() => {
          dispose();
          if (!failed && !signal.aborted) call.end();
        });
    });
    call.on('cancelled', () => dispose());
    call.on('error', () => dispose());
  };
}

/**
 * One request to a decoupled model on a stream: each response is written as the model sends it (after whatever
 * the stream queued before it); with `triton_enable_empty_final_response` every response says whether it is the
 * last (`triton_final_response`) and an empty final response closes the request, as Triton does.
 */
async function streamDecoupled(
  api: InferenceServerApi,
  msg: ModelInferRequestMsg,
  signal: AbortSignal,
  queue: (job: () => Promise<void>) => void,
  write: (msg: ModelStreamInferResponseMsg) => Promise<void>,
  report: (err: unknown) => Promise<void>,
): Promise<void> {
  const flagFinal = msg.parameters?.triton_enable_empty_final_response?.bool_param === true;
  const emit = (resp: InferResponse, final: boolean): void => {
    const r = flagFinal ? { ...resp, parameters: { ...resp.parameters, triton_final_response: final } } : resp;
    const encoded = encodeModelInferResponse(r);
    queue(() => write({ error_message: '', infer_response: encoded }));
  };
  try {
    const request = decodeModelInferRequest(msg);
    const last = await api.infer(request, { signal, onResponse: (r) => emit(r, false) });
    if (flagFinal) emit(last, true);
  } catch (err) {
    queue(() => report(err));
  }
}
