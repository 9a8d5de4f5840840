import type { CompactErrorData } from '../../../core/errors.js';

/**
 * Messages of the control channel (JSON, framed by frame.ts). The Python side is python/nereid_python (stub.py,
 * runner.py); a child written in another language follows the same shapes. Short keys on the hot path.
 *
 * Shared memory places: a block is `[segment, offset, size]` (host blocks) or `[segment, offset]` (child blocks:
 * the host computes the size it reads from the descriptors). A tensor descriptor is
 * `[name, datatype, shape, offset in the block, byte size]`. Any message may carry `free`: `[segment, offset]`
 * blocks of the receiver's segments the sender no longer reads.
 */

export type TensorDesc = [name: string, datatype: string, shape: number[], rel: number, bytes: number];

/**
 * Client CUDA shared memory (process/device.ts). An input in device memory is
 * `[name, datatype, shape, -1, bytes, region, offset]`: its bytes lie `offset` bytes past the base of a region of
 * the message's `cuda` table, which the child opens itself. An output descriptor with `rel` -1 was written by the
 * child into the device buffer the request offered for it (`do`); the host reads nothing.
 */
export type DeviceTensorDesc = [
  name: string,
  datatype: string,
  shape: number[],
  rel: -1,
  bytes: number,
  region: number,
  offset: number,
];
/** A region an `exec` uses: its server-unique id, CUDA device and the client's raw handle (base64). */
export type CudaRegionWire = [region: number, device: number, handle: string];
/** A device output buffer offered to the child: region id, offset from the region's base, byte size. */
export type DeviceSlotWire = [region: number, offset: number, bytes: number];
export type FreeList = [seg: number, off: number][];

/** A child's error: core/errors.ts's compact form. */
export type WireError = CompactErrorData;

/** One request of an `exec`. `c`: numeric correlation id (decimal text), `cs`: string correlation id. */
export interface WireRequest {
  i: (TensorDesc | DeviceTensorDesc)[];
  o: string[];
  id?: string;
  c?: string;
  cs?: string;
  p?: Record<string, string | number | boolean>;
  /** Triton's request flags (1 sequence START, 2 sequence END). */
  f?: number;
  /** The request's timeout in microseconds (its `timeout` parameter), for the model's request.timeout(). */
  t?: number;
  /** Outputs the child may write straight into client device memory, by name. */
  do?: Record<string, DeviceSlotWire>;
  /** OpenTelemetry mode: the request's trace context (a BLS call made with `trace=request.trace()` continues it). */
  tr?: TraceWire;
}

/** A trace context on the wire: W3C traceparent, tracestate, and the Triton trace id of the span it names. */
export interface TraceWire {
  tp: string;
  ts?: string;
  pid?: number;
}

/** A response in a `done` (non-decoupled batch) or `resp` (one at a time) message. */
export interface WireResponse {
  o?: TensorDesc[];
  e?: WireError;
  p?: Record<string, string | number | boolean>;
}

export type ToChild =
  | { op: 'init'; inst: number; payload: unknown; free?: FreeList }
  | {
      op: 'exec';
      inst: number;
      b: number;
      blk: [number, number, number] | null;
      r: WireRequest[];
      cuda?: CudaRegionWire[];
      free?: FreeList;
    }
  | { op: 'cuda_close'; r: number[]; free?: FreeList }
  | { op: 'cancel'; inst: number; b: number; free?: FreeList }
  /**
   * Request `i` of batch `b` had one more of its non-final `resp` messages taken by its client: the child's sender
   * of that request blocks while too many of them (count or bytes) are not taken yet (backpressure).
   */
  | { op: 'took'; inst: number; b: number; i: number; free?: FreeList }
  | { op: 'fini'; inst: number; free?: FreeList }
  | { op: 'free'; free: FreeList }
  | { op: 'autocomplete'; model_path: string; config: unknown; free?: FreeList }
  /** The answer to a `metric` call (python custom metrics): a handle id, a value, or an error. */
  | { op: 'metric_resp'; call: number; e?: WireError; id?: number; v?: number; free?: FreeList }
  | ({
      op: 'bls_resp';
      call: number;
      fin: boolean;
      has?: boolean;
      blk?: [number, number, number] | null;
    } & WireResponse);

/** Every message from the child may hand host blocks back. */
export type FromChild = FromChildBody & { free?: FreeList };

type FromChildBody =
  | { op: 'ready'; pid: number; python?: string; numpy?: string; exe?: string }
  | { op: 'inited'; inst: number }
  | { op: 'init_error'; inst: number; e: WireError; tb?: string }
  | ({
      op: 'resp';
      inst: number;
      b: number;
      i: number;
      fin: boolean;
      none?: boolean;
      blk?: [number, number] | null;
    } & WireResponse)
  | {
      op: 'done';
      inst: number;
      b: number;
      t: [number, number, number];
      err?: WireError;
      blk?: [number, number] | null;
      r?: (WireResponse | null)[];
      /** Requests the model released for rescheduling (iterative sequences): no final answer in this batch. */
      rs?: number[];
    }
  | { op: 'finied'; inst: number; tb?: string }
  | { op: 'log'; lvl: 'info' | 'warn' | 'error' | 'verbose'; msg: string; at?: string; inst?: string | null }
  | { op: 'autocompleted'; config: unknown; defined: boolean }
  | { op: 'error'; e: WireError; tb?: string }
  /**
   * A custom metric operation (python `pb_utils.MetricFamily` / `Metric`); answered with `metric_resp` when it has a
   * `call` (deletes, sent from finalizers, have none and get no answer).
   */
  | {
      op: 'metric';
      call?: number;
      do: 'family_new' | 'family_del' | 'metric_new' | 'metric_del' | 'increment' | 'set' | 'observe' | 'value';
      id?: number;
      name?: string;
      help?: string;
      kind?: string;
      labels?: Record<string, string>;
      buckets?: number[];
      v?: number;
    }
  /** The model cancelled a BLS call it no longer wants the responses of (Triton's `ResponseIterator.cancel()`). */
  | { op: 'bls_cancel'; call: number }
  | {
      op: 'bls';
      call: number;
      model: string;
      version: string;
      blk: [number, number] | null;
      i: TensorDesc[];
      o: string[];
      id: string;
      c?: string;
      cs?: string;
      flags: number;
      timeout: number;
      p: Record<string, string | number | boolean>;
      decoupled: boolean;
      /** How deeply nested this call is (1: made while serving a client's request); see python/nereid_python/bls_args.py. */
      depth?: number;
      /** The calling request's trace context, when the model passed `trace=request.trace()`. */
      tr?: TraceWire;
    }
  /**
   * A model's loading API call (python/nereid_python/loading.py): `api` load_model | unload_model | is_model_ready;
   * `cfg` a JSON config override, `i` override files as UINT8 tensors (name: the path after `file:`) in block `blk`,
   * `dep` unload_dependents, `ver` the version asked about, `init` true when called from initialize. Answered with
   * `bls_resp` (`e`, or `p.ready`).
   */
  | {
      op: 'mctl';
      call: number;
      api: string;
      model: string;
      cfg?: string;
      blk?: [number, number] | null;
      i?: TensorDesc[];
      dep?: boolean;
      ver?: string;
      init?: boolean;
    };
