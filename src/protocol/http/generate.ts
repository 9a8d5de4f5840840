import { InvalidArgError } from '../../core/errors.js';
import { bf16BitsToFloat, halfBitsToFloat } from '../../core/half.js';
import type { InferInput, InferRequest, InferResponse, Parameters } from '../../core/inference.js';
import type { Tensor } from '../../core/tensor.js';
import type { TensorMetadata } from '../../core/wire.js';
import { errorForClient } from '../kserve/client-error.js';
import { bytesElementToJson, flattenJsonData, jsonValuesToTensorData, parseJson } from '../kserve/json-tensor.js';
import { readBody } from './body.js';
import { connectionSignal } from './connection-signal.js';
import { sendJson } from './respond.js';
import type { Handler, RouteContext } from './routes.js';
import { SseWriter, type Json } from './sse.js';
import type { ResolvedModel } from '../../server/api.js';

/**
 * Triton's generate extension: `POST /v2/models/{m}[/versions/{v}]/generate` answers one JSON object,
 * `.../generate_stream` answers server-sent events, one `data:` object per response (the way to call a decoupled
 * model over HTTP). The request is one JSON object: a key naming a model input is that input (a JSON value or a
 * flat array, typed by the model's input; with batching, one batch row), `parameters` and every other key are
 * request parameters. A response object is `model_name`, `model_version` and each output by name (a scalar when
 * it holds one element, else a flat array; BYTES as text). An error before the first event is a JSON error with
 * its status; after it, an event `{"error": ...}` (the status is already 200, as in Triton).
 */

/** Both paths share one route; the suffix picks the answer's form. */
export const generate: Handler = (ctx) => handle(ctx, (ctx.req.url ?? '').split('?')[0].endsWith('/generate_stream'));

async function handle(ctx: RouteContext, stream: boolean): Promise<void> {
  const { req, res, api, model, version, maxInputSize, logger } = ctx;
  const body = await readBody(req, maxInputSize);
  const resolved = api.checkModel(model, version);
  const request = toRequest(model, version, body, resolved.inputs, resolved.maxBatchSize > 0);
  // The request's own signal: the client going away, or this handler giving up on it (a second response to
  // /generate, a stream past its limits) cancels it.
  const own = new AbortController();
  const signal = AbortSignal.any([connectionSignal(req.socket), own.signal]);
  if (!stream) {
    await sendJson(req, res, 200, toJson(await oneResponse(ctx, request, resolved, signal, own)));
    return;
  }
  const events = new SseWriter(req, res, ctx.stream, (err) => {
    logger.warn(`generate_stream: ${err.message}; ending the stream with RESOURCE_EXHAUSTED`);
    own.abort(err);
  });
  const where = { protocol: 'http' as const, method: req.method, url: req.url };
  // A response that cannot be written as JSON (a BYTES output that is not UTF-8) becomes an error event; the throw
  // must not reach the engine's responder, which called this.
  const onResponse = (r: InferResponse): Promise<void> | undefined => {
    let event: Json;
    try {
      event = toJson(r);
    } catch (err) {
      event = { error: errorForClient(err, logger, where).message };
    }
    return events.send(event);
  };
  try {
    const last = await api.infer(request, { signal, resolved, onResponse });
    if (!resolved.decoupled) void events.send(toJson(last));
  } catch (err) {
    // Before any event the client gets an ordinary error answer (status and JSON body).
    if (!events.started) throw err;
    const why = events.exhausted ?? err;
    events.last({ error: errorForClient(why, logger, where).message });
  }
  events.end();
}

/**
 * /generate answers one response. A decoupled model's second response refuses the request at once and cancels it
 * (nothing more is kept), rather than holding every response until the final flag and refusing then.
 */
async function oneResponse(
  ctx: RouteContext,
  request: InferRequest,
  resolved: ResolvedModel,
  signal: AbortSignal,
  own: AbortController,
): Promise<InferResponse> {
  const tooMany = (n: string): InvalidArgError =>
    new InvalidArgError(
      `generate expects exactly one response, but model '${ctx.model}' sent ${n}; use generate_stream`,
    );
  let first: InferResponse | undefined;
  let refuse!: (err: Error) => void;
  const refused = new Promise<never>((_, reject) => (refuse = reject));
  const answer = ctx.api.infer(request, {
    signal,
    resolved,
    onResponse: (r) => {
      if (first === undefined) first = r;
      else if (!own.signal.aborted) {
        const err = tooMany('more than one');
        refuse(err);
        own.abort(err);
      }
    },
  });
  // Once refused, the cancelled request settles later and nobody waits for it.
  answer.catch(() => undefined);
  const last = await Promise.race([answer, refused]);
  if (!resolved.decoupled) return last;
  if (first === undefined) throw tooMany('0');
  return first;
}

function toRequest(
  model: string,
  version: string | undefined,
  body: Uint8Array,
  inputs: readonly TensorMetadata[],
  batching: boolean,
): InferRequest {
  let json: unknown;
  try {
    json = parseJson(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
  } catch (err) {
    throw new InvalidArgError(`generate: the request body is not JSON: ${(err as Error).message}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new InvalidArgError('generate: the request body must be a JSON object');
  }
  const byName = new Map(inputs.map((i) => [i.name, i]));
  const tensors: InferInput[] = [];
  const parameters: Parameters = {};
  for (const [key, value] of Object.entries(json as Record<string, unknown>)) {
    const meta = byName.get(key);
    if (meta !== undefined) {
      tensors.push(toTensor(meta, value, batching));
    } else if (key === 'parameters') {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new InvalidArgError("generate: 'parameters' must be a JSON object");
      }
      for (const [k, v] of Object.entries(value)) parameters[k] = parameterValue(k, v);
    } else {
      parameters[key] = parameterValue(key, value);
    }
  }
  const request: InferRequest = { model, inputs: tensors };
  if (version !== undefined) request.version = version;
  if (Object.keys(parameters).length > 0) request.parameters = parameters;
  return request;
}

function parameterValue(key: string, v: unknown): string | number | boolean | bigint {
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return v;
  throw new InvalidArgError(`generate: parameter '${key}' must be a string, a number or a boolean`);
}

/**
 * One input from its JSON value: a scalar is one element, an array (nested arrays row-major) a flat row. The values
 * go through the codec's one JSON conversion (kserve/json-tensor.ts), so `/generate` refuses what `/infer` refuses
 * (2^40 for INT32, 1.9 for an integer, a string for a number, nesting past the limit) with the same message.
 */
function toTensor(meta: TensorMetadata, value: unknown, batching: boolean): InferInput {
  const values = Array.isArray(value) ? flattenJsonData(meta.name, value) : [value];
  const shape = Array.isArray(value) ? [values.length] : [1];
  const data = jsonValuesToTensorData(meta.name, meta.datatype, values);
  return { name: meta.name, datatype: meta.datatype, shape: batching ? [1, ...shape] : shape, data };
}

function toJson(r: InferResponse): { [k: string]: Json } {
  const out: { [k: string]: Json } = { model_name: r.model, model_version: r.version };
  if (r.id !== undefined) out.id = r.id;
  for (const t of r.outputs) out[t.name] = tensorJson(t);
  return out;
}

function tensorJson(t: Tensor): Json {
  let values: Json[];
  if (Array.isArray(t.data)) {
    // The strict decoder of /infer's JSON: bytes that are not UTF-8 are refused (400), never turned into U+FFFD.
    values = (t.data as Uint8Array[]).map((b, i) => JSON.parse(bytesElementToJson(t.name, i, b)) as string);
  } else if (t.datatype === 'FP16' || t.datatype === 'BF16') {
    const f = t.datatype === 'FP16' ? halfBitsToFloat : bf16BitsToFloat;
    values = Array.from(t.data as Uint16Array, f);
  } else if (t.datatype === 'BOOL') {
    values = Array.from(t.data as Uint8Array, (v) => v !== 0);
  } else if (t.datatype === 'INT64' || t.datatype === 'UINT64') {
    values = Array.from(t.data as BigInt64Array, (v) => (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()));
  } else {
    values = Array.from(t.data as Float32Array);
  }
  return values.length === 1 ? values[0] : values;
}
