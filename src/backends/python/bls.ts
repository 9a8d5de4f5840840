import type { InferRequest, InferResponse, Parameters } from '../../core/inference.js';
import { CancelledError, InvalidArgError, NereidError, UnavailableError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { ChildProcessHost } from '../runtime/process/child.js';
import type { FromChild } from '../runtime/process/protocol.js';
import { readTensorGroups, writeTensorGroups } from '../runtime/process/wire.js';

/**
 * Business Logic Scripting: a Python model's `InferenceRequest(model_name=...).exec()` arrives as a `bls` message
 * and runs through the server's own inference path (scheduling, statistics, validation) via the `ModelCaller` the
 * server attaches; the answer goes back as `bls_resp` with its tensors in a host block.
 */

/**
 * How a backend calls models of the same server (the server's own `infer`): `onResponse` receives a decoupled
 * model's responses as they come, and the promise settles at its final flag.
 */
export interface ModelCaller {
  infer(
    request: InferRequest,
    opts: { signal?: AbortSignal; onResponse?: (r: InferResponse) => void },
  ): Promise<InferResponse>;
}

type BlsMessage = Extract<FromChild, { op: 'bls' }>;

/**
 * How deeply BLS calls may nest. A model that calls itself, or models that call each other, without end would
 * otherwise hold a request (and, for a decoupled model, a thread) per level until something runs out.
 */
export const MAX_BLS_DEPTH = 32;

/** The request parameter that tells the called python model how deep it runs (python/nereid_python/bls_args.py). */
export const BLS_DEPTH_PARAM = '_nereid_bls_depth';

/**
 * Serves one child's BLS calls; calls in flight are aborted when the child exits, or one by one when the model
 * cancels its response iterator (`bls_cancel`, Triton's `ResponseIterator.cancel()`).
 */
export function blsService(
  getCaller: () => ModelCaller | undefined,
  logger: Logger,
): (msg: FromChild, host: ChildProcessHost) => void {
  const inflight = new Map<ChildProcessHost, Map<number, AbortController>>();
  return (msg, host) => {
    if (msg.op === 'bls_cancel') {
      inflight.get(host)?.get(msg.call)?.abort(new CancelledError('BLS request cancelled by the calling model'));
      return;
    }
    if (msg.op !== 'bls') {
      logger.warn({ childPid: host.pid, op: msg.op }, `${host.label} sent an unexpected '${msg.op}' message`);
      return;
    }
    let calls = inflight.get(host);
    if (calls === undefined) {
      const created = new Map<number, AbortController>();
      calls = created;
      inflight.set(host, created);
      void host.exited.then(() => {
        for (const c of created.values()) c.abort(new CancelledError(`${host.label} exited`));
        inflight.delete(host);
      });
    }
    const ctl = new AbortController();
    calls.set(msg.call, ctl);
    void run(msg, host, getCaller(), ctl.signal).finally(() => calls.delete(msg.call));
  };
}

async function run(
  msg: BlsMessage,
  host: ChildProcessHost,
  caller: ModelCaller | undefined,
  signal: AbortSignal,
): Promise<void> {
  const answer = (body: Record<string, unknown>, fin: boolean): void =>
    host.send({ op: 'bls_resp', call: msg.call, fin, ...body } as never);
  const fail = (e: unknown): void => {
    const err = NereidError.from(e);
    answer({ e: { c: err.code, m: err.message } }, true);
  };
  let request: InferRequest;
  try {
    let bytes = 0;
    let inputs;
    try {
      const r = readTensorGroups(host.peer, msg.blk, [msg.i], `${host.label} (BLS request)`);
      inputs = r.tensors[0];
      bytes = r.bytes;
    } finally {
      if (msg.blk) host.freeLater(msg.blk[0], msg.blk[1], bytes);
    }
    request = {
      model: String(msg.model),
      version: msg.version || undefined,
      id: msg.id || undefined,
      inputs,
      outputs: Array.isArray(msg.o) && msg.o.length > 0 ? msg.o.map((name) => ({ name: String(name) })) : undefined,
      parameters: blsParameters(msg),
    };
    request.parameters = { ...request.parameters, [BLS_DEPTH_PARAM]: checkedDepth(msg, request.model) };
    const tr = msg.tr;
    // A child span of the calling request (Triton: InferenceRequest(trace=request.trace())); malformed: untraced.
    if (tr !== null && typeof tr === 'object' && typeof tr.tp === 'string') {
      request.trace = { traceparent: tr.tp };
      if (typeof tr.ts === 'string') request.trace.tracestate = tr.ts;
      if (Number.isSafeInteger(tr.pid)) request.trace.parentId = tr.pid;
    }
  } catch (e) {
    fail(e);
    return;
  }
  if (caller === undefined) {
    fail(
      new UnavailableError(
        `BLS call to model '${request.model}': this server did not give the python backend a way to call models`,
      ),
    );
    return;
  }
  // The BLS request's own timeout: past it the call fails as Triton's does (UNAVAILABLE "Request timeout expired"),
  // not as a cancellation, whatever the scheduler was doing with it then.
  const timeoutUs = Number(msg.timeout) || 0;
  const timeout = timeoutUs > 0 ? AbortSignal.timeout(Math.ceil(timeoutUs / 1000)) : undefined;
  const sig = timeout ? AbortSignal.any([signal, timeout]) : signal;
  const send = (r: InferResponse, fin: boolean): void => {
    const { blk, descs } = writeTensorGroups(host.arena, [r.outputs]);
    answer(r.parameters ? { blk, o: descs[0], p: plain(r.parameters) } : { blk, o: descs[0] }, fin);
  };
  try {
    if (msg.decoupled) {
      // A model that is not decoupled answers once: through the promise, not onResponse.
      let streamed = false;
      const last = await caller.infer(request, {
        signal: sig,
        onResponse: (r) => {
          streamed = true;
          send(r, false);
        },
      });
      if (streamed) answer({ has: false }, true);
      else send(last, true);
    } else {
      send(await caller.infer(request, { signal: sig }), true);
    }
  } catch (e) {
    fail(timeout?.aborted && !signal.aborted ? new UnavailableError('Request timeout expired') : e);
  }
}

/** The call's depth, refused past MAX_BLS_DEPTH; it rides on the request so the called model counts on from it. */
function checkedDepth(msg: BlsMessage, model: string): number {
  const depth = Number(msg.depth) || 1;
  if (depth > MAX_BLS_DEPTH) {
    throw new InvalidArgError(
      `BLS call to model '${model}' refused: BLS calls nested ${depth} deep, past the limit of ${MAX_BLS_DEPTH} ` +
        '(a model calling itself, or models calling each other, without end?)',
    );
  }
  return depth;
}

function blsParameters(msg: BlsMessage): Parameters | undefined {
  const p: Parameters = { ...(msg.p ?? {}) };
  const corr = msg.cs ?? (msg.c !== undefined ? BigInt(msg.c) : undefined);
  if (corr !== undefined) {
    p.sequence_id = corr;
    p.sequence_start = (msg.flags & 1) !== 0;
    p.sequence_end = (msg.flags & 2) !== 0;
  }
  return Object.keys(p).length > 0 ? p : undefined;
}

function plain(p: Parameters): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(p)) out[k] = typeof v === 'bigint' ? v.toString() : v;
  return out;
}
