import { finished } from 'node:stream';
import { forwardedHeaders } from '../kserve/header-forward.js';
import { header, requestTrace } from '../kserve/trace-context.js';
import { modelConfigToJson } from '../../config/index.js';
import { readBody } from './body.js';
import { generate } from './generate.js';
import { connectionSignal } from './connection-signal.js';
import * as ext from './extension-handlers.js';
import { decompress, requestCoding, type BodyKind } from './compression.js';
import { decodeInferRequest, decodeRawRequest, parseHeaderLength, type DecodedInfer } from './infer-request.js';
import { encodeInferResponse } from './infer-response.js';
import { send, sendEmpty, sendJson } from './respond.js';
import { sharedMemory } from './shm-handlers.js';
import type { CoreHandlers, RouteContext } from './routes.js';

/** Health: Triton answers with an EMPTY body, 200 or 400 (no OIP JSON). */
const live = async ({ req, res, api }: RouteContext): Promise<void> => sendEmpty(req, res, api.isLive() ? 200 : 400);
const ready = async ({ req, res, api }: RouteContext): Promise<void> => sendEmpty(req, res, api.isReady() ? 200 : 400);

const server = async ({ req, res, api }: RouteContext): Promise<void> => sendJson(req, res, 200, api.metadata());

/** Model ready: 200 empty, or 400 `{"error":"Model version not ready"}` (Triton's HandleModelReady). */
const modelReady = async ({ req, res, api, model, version }: RouteContext): Promise<void> =>
  api.modelReady(model, version)
    ? sendEmpty(req, res, 200)
    : sendJson(req, res, 400, { error: 'Model version not ready' });

const modelMetadata = async ({ req, res, api, model, version }: RouteContext): Promise<void> =>
  sendJson(req, res, 200, api.modelMetadata(model, version));

const modelConfig = async ({ req, res, api, model, version }: RouteContext): Promise<void> =>
  sendJson(req, res, 200, modelConfigToJson(api.modelConfig(model, version)));

/**
 * Infer, in Triton's order (HandleInfer): decompress → size → header length → model lookup → parse. The model lookup
 * comes before JSON parsing so an unknown model wins over a malformed body.
 */
const modelInfer = async (ctx: RouteContext): Promise<void> => {
  const { req, res, api, model, version, maxInputSize } = ctx;
  const recvStart = process.hrtime.bigint();
  const coding = requestCoding(req.headers['content-encoding']);
  const headerValue = req.headers['inference-header-content-length'];
  let body = await readBody(req, maxInputSize, bodyKind(coding !== undefined, headerValue));
  if (coding !== undefined) body = await decompress(body, coding, maxInputSize);
  const headerLength = parseHeaderLength(Array.isArray(headerValue) ? headerValue[0] : headerValue, body.byteLength);
  const resolved = api.checkModel(model, version);
  let decoded: DecodedInfer;
  if (headerLength === 0) {
    decoded = decodeRawRequest(model, version, body, resolved);
  } else {
    decoded = decodeInferRequest(model, version, body, headerLength);
  }
  if (ctx.headerForward !== undefined) {
    const forwarded = forwardedHeaders(ctx.headerForward, req.headers);
    decoded.request.parameters = { ...forwarded, ...decoded.request.parameters };
  }

  decoded.request.trace = requestTrace(
    'HTTP',
    recvStart,
    header(req.headers.traceparent),
    header(req.headers.tracestate),
  );
  // Aborted when the client goes away: queued work is dropped, running work is discarded.
  // Views: the outputs may stay in an engine's memory until written; `finished` gives it back once the response
  // is flushed to the socket, failed or cut (also when that already happened).
  // A traced request's InferRequest span ends with the write too (Triton's HTTP_SEND_START/END).
  const response = await api.infer(decoded.request, {
    signal: connectionSignal(req.socket),
    resolved,
    views: true,
    reportsSend: true,
  });
  const { lease, onSent } = response;
  let sendStart = process.hrtime.bigint();
  if (lease !== undefined || onSent !== undefined) {
    finished(res, () => {
      lease?.release();
      onSent?.(sendStart, process.hrtime.bigint());
    });
  }
  const encoded = await encodeInferResponse(response, decoded.plan, ctx.maxResponseBytes);
  sendStart = process.hrtime.bigint();
  if (encoded.headerLength === undefined) {
    await send(req, res, 200, 'application/json', encoded.header, {}, { compressible: true });
  } else {
    await send(
      req,
      res,
      200,
      'application/octet-stream',
      [...encoded.header, ...encoded.blobs],
      { 'Inference-Header-Content-Length': encoded.headerLength },
      { compressible: true },
    );
  }
};

/**
 * Which of Triton's messages a body over the limit gets: compressed bodies are measured after inflating (their bytes
 * on the wire over the limit would inflate past it too), `Inference-Header-Content-Length: 0` is a raw binary body.
 */
function bodyKind(compressed: boolean, headerValue: string | string[] | undefined): BodyKind {
  if (compressed) return 'compressed';
  const h = Array.isArray(headerValue) ? headerValue[0] : headerValue;
  return h !== undefined && h.trim() !== '' && Number(h) === 0 ? 'raw' : 'json';
}

/** The handlers of the endpoints Nereid implements (routes.ts holds the table). */
export const CORE_HANDLERS: CoreHandlers = Object.freeze({
  server,
  live,
  ready,
  modelReady,
  modelMetadata,
  modelConfig,
  modelInfer,
  modelStats: ext.modelStats,
  generate,
  repositoryIndex: ext.repositoryIndex,
  repositoryControl: ext.repositoryControl,
  logging: ext.logging,
  trace: ext.trace,
  sharedMemory,
});
