import type * as grpc from '@grpc/grpc-js';
import { CancelledError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
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

    call.on('data', (msg: ModelInferRequestMsg) => {
      if (++pending >= limits.maxResponsePoolSize) call.pause();
      const running = inferOnce(api, msg, signal, limits).then(
        (infer_response): ModelStreamInferResponseMsg => ({ error_message: '', infer_response }),
        (err: unknown) => ({ err }),
      );
      tail = tail.then(async () => {
        const result = await running;
        if (failed || signal.aborted) return;
        if ('err' in result) {
          if (endOnError) {
            failed = true;
            call.emit('error', toStatus(result.err, logger, 'ModelStreamInfer'));
            return;
          }
          await write({ error_message: errorMessage(result.err, logger, 'ModelStreamInfer'), infer_response: null });
          return;
        }
        await write(result);
      });
      tail = tail
        .catch((err: unknown) => logger.error({ err }, 'gRPC ModelStreamInfer: writing a response failed'))
        .finally(settled);
    });
    call.on('end', () => {
      // tail never rejects (each write's failure is caught and logged above), so nothing is dropped here.
      void tail.then(() => {
        dispose();
        if (!failed && !signal.aborted) call.end();
      });
    });
    call.on('cancelled', () => dispose());
    call.on('error', () => dispose());
  };
}
