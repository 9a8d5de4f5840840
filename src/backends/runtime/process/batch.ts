import { InternalError, NereidError } from '../../../core/errors.js';
import type { EngineRequest, EngineResponse, ExecuteTimings, Responder } from '../../contract.js';
import type { DeviceSlotWire, TensorDesc, DeviceTensorDesc, TraceWire, WireRequest } from './protocol.js';

/**
 * One batch an instance in a child process is running (process/instance.ts): its requests, who answers them, which
 * have had their final response, and how its `execute` settles; and the `exec` message's requests. Main thread only.
 */

export interface Inflight {
  readonly id: number;
  readonly requests: readonly EngineRequest[];
  readonly responder: Responder;
  readonly final: boolean[];
  open: number;
  returned: boolean;
  timings: ExecuteTimings | undefined;
  readonly hostInNs: number;
  readonly resolve: (t: ExecuteTimings) => void;
  readonly reject: (e: Error) => void;
  readonly signal: AbortSignal;
  readonly onAbort: () => void;
  /** Settles with the batch, for destroy() to wait on; made only when someone waits. */
  settled: Promise<void> | undefined;
  /** `execute` resolved while decoupled requests are still answering. */
  resolved: boolean;
  readonly promise: Promise<ExecuteTimings>;
}

/** A batch just sent: nothing answered yet; `promise` is what `execute` returns. */
export function newBatch(
  id: number,
  requests: readonly EngineRequest[],
  responder: Responder,
  signal: AbortSignal,
  onAbort: () => void,
  hostInNs: number,
): Inflight {
  let resolve!: (t: ExecuteTimings) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<ExecuteTimings>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return {
    id,
    requests,
    responder,
    final: new Array<boolean>(requests.length).fill(false),
    open: requests.length,
    returned: false,
    timings: undefined,
    hostInNs,
    resolve,
    reject,
    signal,
    onAbort,
    settled: undefined,
    resolved: false,
    promise,
  };
}

/**
 * Delivers a response of request `index`, checked against the config first (`check` may turn it into an error);
 * the responder's promise (if any) settles when its client took it. A request past its final response is ignored.
 */
export function deliver(
  b: Inflight,
  index: number,
  resp: EngineResponse | Error | null,
  final: boolean,
  check: ((request: EngineRequest, response: EngineResponse) => EngineResponse) | undefined,
): void | Promise<void> {
  if (b.final[index]) {
    if (resp !== null && !(resp instanceof Error)) resp.lease?.release();
    return;
  }
  let r = resp;
  if (r !== null && !(r instanceof Error) && check !== undefined) {
    const given = r;
    try {
      r = check(b.requests[index], given);
    } catch (e) {
      given.lease?.release();
      r = NereidError.from(e);
    }
  }
  if (final) {
    b.final[index] = true;
    b.open--;
  }
  if (b.responder.sendTaken) return b.responder.sendTaken(index, r, { final });
  b.responder.send(index, r, { final });
}

/**
 * The model released request `index` for rescheduling: it leaves this batch without a final response (the
 * scheduler runs it again), or, where the responder cannot reschedule, fails.
 */
export function rescheduled(b: Inflight, index: number, instance: string): void {
  if (!Number.isInteger(index) || index < 0 || index >= b.requests.length || b.final[index]) return;
  if (b.responder.reschedule === undefined) {
    void deliver(
      b,
      index,
      new InternalError(`instance ${instance} rescheduled request ${index}, which its scheduler cannot do`),
      true,
      undefined,
    );
    return;
  }
  b.final[index] = true;
  b.open--;
  b.responder.reschedule(index);
}

/**
 * A batch's `execute` resolves once the model's execute returned and (not decoupled) every request had its final
 * response. A decoupled model's requests may answer later (Triton's decoupled models keep streaming from their own
 * threads while the instance takes the next batch); the scheduler gets those finals through the responder, and the
 * batch stays until the last one. True when the batch is done and may be forgotten.
 */
export function settle(b: Inflight, decoupled: boolean): boolean {
  if (!b.returned || b.timings === undefined) return false;
  if (decoupled && !b.resolved) {
    b.resolved = true;
    b.resolve(b.timings);
  }
  if (b.open > 0) return false;
  b.resolve(b.timings);
  return true;
}

/** The `exec` message's requests: inputs by descriptor, ids, correlation ids and parameters as JSON carries them. */
export function wireRequests(
  requests: readonly EngineRequest[],
  descs: (TensorDesc | DeviceTensorDesc)[][],
  slots: (Record<string, DeviceSlotWire> | undefined)[] | undefined,
): WireRequest[] {
  return requests.map((r, i) => {
    const w: WireRequest = { i: descs[i], o: [...r.outputs] };
    if (r.id) w.id = r.id;
    if (r.correlationId !== undefined) {
      if (typeof r.correlationId === 'string') w.cs = r.correlationId;
      else if (r.correlationId !== 0n) w.c = r.correlationId.toString();
    }
    if (r.parameters !== undefined) w.p = plainParams(r.parameters);
    if (r.flags) w.f = r.flags;
    const timeout = r.parameters?.timeout;
    if (timeout !== undefined && Number(timeout) > 0) w.t = Number(timeout);
    const s = slots?.[i];
    if (s !== undefined) w.do = s;
    // OpenTelemetry mode: the request's context, which a python model passes on to its BLS calls.
    if (r.trace?.traceparent !== undefined) w.tr = traceWire(r.trace);
    return w;
  });
}

function traceWire(t: NonNullable<EngineRequest['trace']>): TraceWire {
  const w: TraceWire = { tp: t.traceparent! };
  if (t.tracestate) w.ts = t.tracestate;
  if (t.parentId !== undefined) w.pid = t.parentId;
  return w;
}

/** Parameters as JSON can carry them (a bigint beyond 2^53 travels as its decimal text). */
function plainParams(
  p: Readonly<Record<string, string | number | boolean | bigint>>,
): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(p)) {
    out[k] = typeof v === 'bigint' ? (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()) : v;
  }
  return out;
}
