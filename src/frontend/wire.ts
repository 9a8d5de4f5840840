import * as workerThreads from 'node:worker_threads';
import type { FixedTypedArray } from '../core/datatypes.js';
import { InternalError, type ErrorData } from '../core/errors.js';
import { addressOf, viewAt } from '../native/addressable.js';
import type { AsyncMethod } from './methods.js';
import type {
  InferInput,
  InferOutput,
  InferRequest,
  InferResponse,
  Parameters,
  RequestedOutput,
  RequestTrace,
  SharedMemoryRef,
} from '../core/inference.js';
import {
  decodeBytes,
  elementCount,
  encodeBytes,
  encodedBytesLength,
  fixedBytes,
  viewFixed,
  type Tensor,
  type TensorData,
} from '../core/tensor.js';

/**
 * What crosses between a front-end thread and the main thread (postMessage, structured clone), in one place.
 *
 * Infer requests and responses travel as flat arrays, not as the nested objects of core/inference.ts: the main
 * thread pays for deserializing every message, and flat arrays cost it about a quarter less (measured on `simple`:
 * 3.6 against 5.2 µs of main-thread CPU per round trip on Node 24).
 *
 * Ownership of tensor data (a message OWNS every ArrayBuffer in its transfer list; the sender never touches it again):
 * - small tensors (up to ARENA_MAX_BYTES) are copied into the one arena buffer of their post (Arena, below): every
 *   message sent in one turn of the event loop shares one transferred ArrayBuffer, and the receiver's tensors are
 *   views into it. Measured on Node 24, `simple`-sized, 8 requests per post: 1.4 µs of main-thread CPU per request
 *   round trip, against 3.0 with a transferred buffer per tensor (each transfer detaches and re-creates a backing
 *   store on both sides);
 * - a larger fixed-size tensor whose view spans its whole ArrayBuffer is transferred, not copied (JSON-decoded inputs,
 *   a raw binary body holding one input, the output of a batch of one);
 * - any other larger view (several inputs in one HTTP body, gRPC contents inside the received message, one request's
 *   slice of a batch's output allocation) is copied once into a buffer of its own, which is transferred: the rest of
 *   its buffer may still be in use on the sending side (the other requests' outputs, grpc-js's receive buffer);
 * - BYTES travel in their wire form (4-byte little-endian length, then the bytes, per element), packed by the sender
 *   and viewed (not copied) by the receiver;
 * - a larger output of a lent response (an engine's shared-memory block, a pooled page-locked buffer: core/lease.ts)
 *   travels as its address (native/addressable.ts): the front-end thread writes it to its socket from the engine's
 *   memory, and the main thread copies nothing. The main thread holds the response's lease until the thread sends
 *   RETURN for it (its write ended, or it gave the response up).
 * The source views must stay untouched until the post goes out (the end of the current event-loop turn): requests
 * are given to infer(), responses to the caller, so nobody writes them.
 */

/** Message tags. Front-end thread → main: INFER, CALL, ABORT, RELEASE, LOG, READY, FAILED, FATAL, CLOSED, TAKEN. */
export const Tag = Object.freeze({
  INFER: 1,
  CALL: 2,
  ABORT: 3,
  RELEASE: 4,
  LOG: 5,
  READY: 6,
  FAILED: 7,
  FATAL: 8,
  CLOSED: 9,
  /** Several messages in one postMessage, either way (outbox.ts). */
  BATCH: 10,
  /**
   * `[TAKEN, id, n]`: the stream took `n` more of request `id`'s PARTIALs (its client read them), so the model's
   * send() may go on: a stream's backpressure crosses back to the engine as it does without threads.
   */
  TAKEN: 11,
  /** `[RETURN, leaseIds]`: the thread no longer reads the outputs those RESULTs lent it (wire.ts, above). */
  RETURN: 12,
  // main → front-end thread
  RESULT: 20,
  ERROR: 21,
  REPLY: 22,
  CLOSE: 23,
  CRASH: 24,
  /** One of a decoupled model's responses, before the request's RESULT (the outbox keeps their order). */
  PARTIAL: 25,
} as const);

/** INFER flags. */
export const InferFlag = Object.freeze({
  /** The caller passed `onResponse` (a streaming endpoint): decoupled models may answer it. */
  STREAMING: 1,
  /** The caller asked for views (`InferOptions.views`): it releases the response's lease once written. */
  VIEWS: 2,
} as const);

/** Errors cross as core/errors.ts's plain data. */
export type WireError = ErrorData;

// Node >= 21 marks Buffer's pool (and other memory that must stay put) as untransferable; postMessage throws when
// such a buffer is in the transfer list. Older Nodes have no way to ask, and never reach here with one: the pool
// is never spanned whole by a tensor view.
const markedUntransferable = (workerThreads as { isMarkedAsUntransferable?: (o: object) => boolean })
  .isMarkedAsUntransferable;

function spansOwnBuffer(a: ArrayBufferView): boolean {
  return (
    a.buffer instanceof ArrayBuffer &&
    a.byteOffset === 0 &&
    a.byteLength === a.buffer.byteLength &&
    !(markedUntransferable?.(a.buffer) ?? false)
  );
}

/** Tensors up to this size travel in the arena; larger ones are transferred (copied first when they are views). */
export const ARENA_MAX_BYTES = 64 * 1024;

/**
 * The arena of one post: small tensors are laid out as they are packed (each an 8-byte header holding its byte
 * length, then its bytes, 8-aligned for BigInt64/Float64 views) and copied into one ArrayBuffer when the post goes
 * out. A message refers to a tensor in it by the offset of its header.
 */
export class Arena {
  #size = 0;
  #parts: { at: number; length: number; write(target: Uint8Array): void }[] = [];

  get empty(): boolean {
    return this.#parts.length === 0;
  }

  add(length: number, write: (target: Uint8Array) => void): number {
    const at = this.#size;
    this.#parts.push({ at, length, write });
    this.#size += 8 + Math.ceil(length / 8) * 8;
    return at;
  }

  /** The buffer holding every tensor added; the arena starts empty again. */
  take(): ArrayBuffer {
    const buffer = new ArrayBuffer(this.#size);
    const view = new DataView(buffer);
    for (const p of this.#parts) {
      view.setUint32(p.at, p.length, true);
      p.write(new Uint8Array(buffer, p.at + 8, p.length));
    }
    this.#size = 0;
    this.#parts = [];
    return buffer;
  }
}

/** Lent memory as it travels: its address in this process and its length in bytes. */
interface AddressRef {
  address: bigint;
  bytes: number;
}

function isAddressRef(data: unknown): data is AddressRef {
  return (
    typeof data === 'object' &&
    data !== null &&
    !ArrayBuffer.isView(data) &&
    typeof (data as AddressRef).address === 'bigint'
  );
}

/**
 * Tensor data as it travels: an arena offset (number), the data itself, or (`byAddress`: a lent output) its address,
 * adding what it transfers to `transfer` (see the ownership rules above).
 */
function packData(
  data: TensorData,
  arena: Arena,
  transfer: ArrayBuffer[],
  byAddress = false,
): number | FixedTypedArray | Uint8Array | AddressRef {
  if (Array.isArray(data)) {
    const length = encodedBytesLength(data);
    if (length <= ARENA_MAX_BYTES) return arena.add(length, (target) => encodeBytes(data, target));
    const wire = encodeBytes(data);
    transfer.push(wire.buffer as ArrayBuffer);
    return wire;
  }
  const fixed = data as FixedTypedArray;
  if (fixed.buffer instanceof SharedArrayBuffer) return fixed;
  if (fixed.byteLength <= ARENA_MAX_BYTES) {
    return arena.add(fixed.byteLength, (target) => target.set(fixedBytes(fixed)));
  }
  const address = byAddress ? addressOf(fixed) : undefined;
  if (address !== undefined) return { address, bytes: fixed.byteLength };
  const own = spansOwnBuffer(fixed) ? fixed : fixed.slice();
  if (!transfer.includes(own.buffer as ArrayBuffer)) transfer.push(own.buffer as ArrayBuffer);
  return own;
}

function unpackData(
  name: string,
  datatype: Tensor['datatype'],
  shape: number[],
  data: unknown,
  arena: ArrayBuffer | undefined,
): TensorData {
  let bytes: FixedTypedArray | Uint8Array;
  if (isAddressRef(data)) {
    bytes = viewAt(data.address, data.bytes);
    if (datatype !== 'BYTES') bytes = viewFixed(datatype, bytes);
  } else if (typeof data === 'number') {
    if (arena === undefined) throw new InternalError(`tensor '${name}' refers to an arena its message lacks`);
    const length = new DataView(arena).getUint32(data, true);
    bytes = new Uint8Array(arena, data + 8, length);
    if (datatype !== 'BYTES') bytes = viewFixed(datatype, bytes);
  } else {
    bytes = data as FixedTypedArray | Uint8Array;
  }
  return datatype === 'BYTES'
    ? decodeBytes(bytes as Uint8Array, elementCount(shape, `tensor '${name}'`), name)
    : (bytes as FixedTypedArray);
}

/**
 * `[INFER, id, signalId, token, flags, model, version, requestId, parameters, outputs, trace, ...inputs]`, each input six
 * slots: name, datatype, shape, data, parameters, sharedMemory. An input read from client shared memory carries no
 * data (null): the main thread reads the region, where the registry of regions lives.
 */
export type InferMessage = [
  typeof Tag.INFER,
  number,
  number,
  number,
  number,
  string,
  string | undefined,
  string | undefined,
  Parameters | undefined,
  RequestedOutput[] | undefined,
  RequestTrace | undefined,
  ...unknown[],
];
const REQUEST_HEAD = 11;
const INPUT_SLOTS = 6;

/** A tensor whose bytes live in client shared memory has none of its own (the protocols' NO_DATA). */
const NO_DATA = new Uint8Array(0);

export function packInfer(
  id: number,
  signalId: number,
  token: number,
  flags: number,
  r: InferRequest,
  arena: Arena,
): { msg: InferMessage; transfer: ArrayBuffer[] } {
  const transfer: ArrayBuffer[] = [];
  const msg: InferMessage = [
    Tag.INFER,
    id,
    signalId,
    token,
    flags,
    r.model,
    r.version,
    r.id,
    r.parameters,
    r.outputs,
    r.trace,
  ];
  for (const t of r.inputs) {
    const data = t.sharedMemory === undefined ? packData(t.data, arena, transfer) : null;
    msg.push(t.name, t.datatype, t.shape, data, t.parameters, t.sharedMemory);
  }
  return { msg, transfer };
}

/** `arena`: the buffer of the post the message came in (outbox.ts). */
export function unpackInfer(msg: InferMessage, arena: ArrayBuffer | undefined): InferRequest {
  const request: InferRequest = { model: msg[5], inputs: [] };
  if (msg[6] !== undefined) request.version = msg[6];
  if (msg[7] !== undefined) request.id = msg[7];
  if (msg[8] !== undefined) request.parameters = msg[8];
  if (msg[9] !== undefined) request.outputs = msg[9];
  if (msg[10] !== undefined) request.trace = msg[10];
  for (let i = REQUEST_HEAD; i < msg.length; i += INPUT_SLOTS) {
    const name = msg[i] as string;
    const datatype = msg[i + 1] as Tensor['datatype'];
    const shape = msg[i + 2] as number[];
    const sharedMemory = msg[i + 5] as SharedMemoryRef | undefined;
    const data = sharedMemory === undefined ? unpackData(name, datatype, shape, msg[i + 3], arena) : NO_DATA;
    const input: InferInput = { name, datatype, shape, data };
    if (msg[i + 4] !== undefined) input.parameters = msg[i + 4] as Parameters;
    if (sharedMemory !== undefined) input.sharedMemory = sharedMemory;
    request.inputs.push(input);
  }
  return request;
}

/**
 * `[RESULT | PARTIAL, id, stale, model, version, requestId, parameters, lease, ...outputs]`, each output five slots:
 * name, datatype, shape, data, sharedMemory (an output written into client shared memory carries no data: null).
 * `stale`: the front end's cached model lookup for this request no longer holds (host.ts). `lease`: the id the
 * thread RETURNs once it no longer reads outputs sent by address, or 0 when none was.
 */
export type ResultMessage = [
  typeof Tag.RESULT | typeof Tag.PARTIAL,
  number,
  boolean,
  string,
  string,
  string | undefined,
  Parameters | undefined,
  number,
  ...unknown[],
];
const RESULT_HEAD = 8;
const OUTPUT_SLOTS = 5;

/**
 * `tag`: RESULT settles the request; PARTIAL is one response of a decoupled model. `lease`: nonzero for a lent
 * response whose larger outputs may go by address under that id; `byAddress` says whether any did (else the
 * message holds copies of everything, and the lease may go back once the post went out).
 */
export function packResult(
  id: number,
  stale: boolean,
  r: InferResponse,
  arena: Arena,
  tag: typeof Tag.RESULT | typeof Tag.PARTIAL = Tag.RESULT,
  lease = 0,
): { msg: ResultMessage; transfer: ArrayBuffer[]; byAddress: boolean } {
  const transfer: ArrayBuffer[] = [];
  const msg: ResultMessage = [tag, id, stale, r.model, r.version, r.id, r.parameters, 0];
  let byAddress = false;
  for (const t of r.outputs) {
    const data = t.sharedMemory === undefined ? packData(t.data, arena, transfer, lease !== 0) : null;
    if (isAddressRef(data)) byAddress = true;
    msg.push(t.name, t.datatype, t.shape, data, t.sharedMemory);
  }
  if (byAddress) msg[7] = lease;
  return { msg, transfer, byAddress };
}

export function unpackResult(msg: ResultMessage, arena: ArrayBuffer | undefined): InferResponse {
  const response: InferResponse = { model: msg[3], version: msg[4], outputs: [] };
  if (msg[5] !== undefined) response.id = msg[5];
  if (msg[6] !== undefined) response.parameters = msg[6];
  for (let i = RESULT_HEAD; i < msg.length; i += OUTPUT_SLOTS) {
    const name = msg[i] as string;
    const datatype = msg[i + 1] as Tensor['datatype'];
    const shape = msg[i + 2] as number[];
    const sharedMemory = msg[i + 4] as SharedMemoryRef | undefined;
    const data = sharedMemory === undefined ? unpackData(name, datatype, shape, msg[i + 3], arena) : NO_DATA;
    const output: InferOutput = { name, datatype, shape, data };
    if (sharedMemory !== undefined) output.sharedMemory = sharedMemory;
    response.outputs.push(output);
  }
  return response;
}

/** `[ERROR, id, stale, error]`: an infer that failed. */
export type ErrorMessage = [typeof Tag.ERROR, number, boolean, WireError];

/**
 * `[CALL, id, signalId, method, args]` → `[REPLY, id, ok, value | WireError]`: the asynchronous facade methods
 * (methods.ts); `args` are the call's without its options' signal, which `signalId` names.
 */
export type CallMessage = [typeof Tag.CALL, number, number, AsyncMethod, unknown[]];
export type ReplyMessage = [typeof Tag.REPLY, number, boolean, unknown];
