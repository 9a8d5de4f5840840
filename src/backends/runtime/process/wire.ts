import { DATATYPES, isDataType } from '../../../core/datatypes.js';
import type { DeviceBuffer } from '../../../core/device.js';
import { InternalError } from '../../../core/errors.js';
import { decodeBytes, elementCount, encodeBytes, encodedBytesLength, fixedBytes } from '../../../core/tensor.js';
import type { BytesData, Tensor } from '../../../core/tensor.js';
import type { FixedTypedArray } from '../../../core/datatypes.js';
import { alignUp } from './allocator.js';
import type { TensorDesc } from './protocol.js';
import type { HostArena, PeerSegments } from './shm.js';

/**
 * Tensors to and from shared memory. Writing: every tensor of a message goes into one host block, each at a
 * 64-byte aligned offset (one allocation per batch). Reading: the child's block is copied out once into a fresh
 * ArrayBuffer and the tensors are views of it (aligned, so no second copy), because the child reuses its block as
 * soon as it is handed back — unless every request of the message takes views (`EngineRequest.viewsOk`): then
 * the tensors view the block itself and it is handed back when their lease is released (core/lease.ts).
 */

/** Byte size of a tensor's data in shared memory (BYTES in Triton's length-prefixed form). */
function byteSize(t: Tensor): number {
  return Array.isArray(t.data) ? encodedBytesLength(t.data as BytesData) : (t.data as FixedTypedArray).byteLength;
}

/** Lays out `groups` (one list of tensors per request) in one host block; returns the block and the descriptors. */
export function writeTensorGroups(
  arena: HostArena,
  groups: readonly (readonly Tensor[])[],
): { blk: [number, number, number] | null; descs: TensorDesc[][] } {
  let total = 0;
  const sizes: number[][] = [];
  for (const g of groups) {
    const s = g.map(byteSize);
    for (const n of s) total += alignUp(n);
    sizes.push(s);
  }
  if (total === 0) {
    return { blk: null, descs: groups.map((g) => g.map((t) => [t.name, t.datatype, t.shape, 0, 0] as TensorDesc)) };
  }
  const block = arena.alloc(total);
  const descs: TensorDesc[][] = [];
  let rel = 0;
  for (let gi = 0; gi < groups.length; gi++) {
    const out: TensorDesc[] = [];
    const g = groups[gi];
    for (let ti = 0; ti < g.length; ti++) {
      const t = g[ti];
      const n = sizes[gi][ti];
      if (n > 0) {
        if (Array.isArray(t.data)) encodeBytes(t.data as BytesData, block.bytes, rel);
        else block.bytes.set(fixedBytes(t.data as FixedTypedArray), rel);
      }
      out.push([t.name, t.datatype, t.shape, n > 0 ? rel : 0, n]);
      rel += alignUp(n);
    }
    descs.push(out);
  }
  return { blk: [block.seg, block.off, block.size], descs };
}

/**
 * Like `writeTensorGroups`, but name-major: the tensors of one input name, request after request, back to back
 * with no padding between them (each name's run starts 64-byte aligned). An engine that copies a batch's input
 * to a device buffer can then move each name in one copy (TensorRT's `coalesce-request-input`). Every request
 * must give the same names; a request that differs falls back to the request-major layout.
 */
export function writeTensorGroupsByName(
  arena: HostArena,
  groups: readonly (readonly Tensor[])[],
): { blk: [number, number, number] | null; descs: TensorDesc[][] } {
  const names = (groups[0] ?? []).map((t) => t.name);
  const same = groups.every((g) => g.length === names.length && g.every((t, i) => t.name === names[i]));
  if (!same || groups.length < 2) return writeTensorGroups(arena, groups);
  const sizes = groups.map((g) => g.map(byteSize));
  let total = 0;
  for (let ti = 0; ti < names.length; ti++) {
    let run = 0;
    for (const s of sizes) run += s[ti];
    total += alignUp(run);
  }
  const descs: TensorDesc[][] = groups.map(() => []);
  if (total === 0) {
    groups.forEach((g, gi) => g.forEach((t) => descs[gi].push([t.name, t.datatype, t.shape, 0, 0])));
    return { blk: null, descs };
  }
  const block = arena.alloc(total);
  let rel = 0;
  for (let ti = 0; ti < names.length; ti++) {
    for (let gi = 0; gi < groups.length; gi++) {
      const t = groups[gi][ti];
      const n = sizes[gi][ti];
      if (n > 0) {
        if (Array.isArray(t.data)) encodeBytes(t.data as BytesData, block.bytes, rel);
        else block.bytes.set(fixedBytes(t.data as FixedTypedArray), rel);
      }
      descs[gi].push([t.name, t.datatype, t.shape, n > 0 ? rel : 0, n]);
      rel += n;
    }
    rel = alignUp(rel);
  }
  return { blk: [block.seg, block.off, block.size], descs };
}

/** Device output buffers a request offered, by name (its `device.outputs`), for outputs written in place. */
export type DeviceSlots = ReadonlyMap<string, DeviceBuffer> | undefined;

/**
 * Copies the tensors a child message names out of its block. `descGroups` are the tensor lists of each response
 * in the message; returns one tensor list per group. A descriptor with `rel` -1 is an output the child wrote into
 * the device buffer its request offered (`slots`, one per group): it becomes a tensor with `device` set. Throws
 * INTERNAL naming `who` for a malformed descriptor.
 */
export function readTensorGroups(
  peer: PeerSegments,
  blk: [number, number] | null | undefined,
  descGroups: readonly (readonly TensorDesc[] | undefined)[],
  who: string,
  slots: readonly DeviceSlots[] = [],
  lend = false,
): { tensors: Tensor[][]; bytes: number; lent: boolean } {
  let end = 0;
  for (const g of descGroups) {
    for (const d of g ?? []) {
      if (!Array.isArray(d) || d.length !== 5) throw new InternalError(`${who} sent a malformed tensor descriptor`);
      const [, , , rel, n] = d;
      if (!Number.isSafeInteger(rel) || !Number.isSafeInteger(n) || rel < -1 || n < 0) {
        throw new InternalError(`${who} sent tensor '${d[0]}' at an invalid place`);
      }
      if (n > 0 && rel >= 0) end = Math.max(end, rel + n);
    }
  }
  let copy: Uint8Array | undefined;
  // Lent: the tensors view the child's block itself (the caller keeps the block until their lease is released).
  // Small blocks are still copied: a view would pin a whole block for a few bytes a copy moves for nothing.
  const lent = lend && end >= LEND_MIN_BYTES;
  if (end > 0) {
    if (!blk) throw new InternalError(`${who} sent tensor data without a shared-memory block`);
    if (lent) copy = peer.view(blk[0], blk[1], end);
    else {
      // Buffer.allocUnsafe: small copies come from Node's pool (no ArrayBuffer of their own, which costs GC time
      // at high rates); its offsets are 8-byte aligned, enough for every TypedArray. Consumers that transfer a
      // buffer to a thread already copy views that do not span their ArrayBuffer.
      copy = Buffer.allocUnsafe(end);
      copy.set(peer.view(blk[0], blk[1], end));
    }
  }
  return {
    tensors: descGroups.map((g, gi) =>
      (g ?? []).map((d) => (d[3] === -1 ? writtenOnDevice(d, slots[gi], who) : toTensor(d, copy, who))),
    ),
    bytes: end,
    lent,
  };
}

/**
 * Below this a message's outputs are copied even when the caller takes views: copying 64 KiB costs a few µs,
 * while a view keeps the block from the child until the response is written.
 */
const LEND_MIN_BYTES = 64 * 1024;

/** An output the child wrote into its request's device buffer: checked against the buffer, no bytes read. */
function writtenOnDevice(d: TensorDesc, slots: DeviceSlots, who: string): Tensor {
  const [name, datatype, shape, , n] = d;
  const slot = typeof name === 'string' ? slots?.get(name) : undefined;
  if (slot === undefined || !isDataType(datatype) || datatype === 'BYTES' || !Array.isArray(shape)) {
    throw new InternalError(`${who} sent output '${String(name)}' as written in device memory it was not given`);
  }
  const info = DATATYPES[datatype];
  const bytes = elementCount(shape, `${who}: output '${name}'`) * info.byteSize;
  if (n !== bytes || n > slot.byteSize) {
    throw new InternalError(
      `${who} wrote output '${name}' (${n} bytes, shape [${shape.join(',')}] of ${datatype} needs ${bytes}) into a device buffer of ${slot.byteSize} bytes`,
    );
  }
  return { name, datatype, shape, data: new info.array!(0), device: { ...slot, byteSize: n } };
}

function toTensor(d: TensorDesc, copy: Uint8Array | undefined, who: string): Tensor {
  const [name, datatype, shape, rel, n] = d;
  if (typeof name !== 'string' || !isDataType(datatype) || !Array.isArray(shape)) {
    throw new InternalError(
      `${who} sent output '${String(name)}' with datatype '${String(datatype)}', not a Triton datatype`,
    );
  }
  const count = elementCount(shape, `${who}: output '${name}'`);
  const info = DATATYPES[datatype];
  if (datatype === 'BYTES') {
    const data = n === 0 ? new Uint8Array(0) : copy!.subarray(rel, rel + n);
    try {
      return { name, datatype, shape, data: decodeBytes(data, count, name) };
    } catch (e) {
      throw new InternalError(
        `${who} sent BYTES output '${name}' that does not match its shape: ${(e as Error).message}`,
      );
    }
  }
  if (n !== count * info.byteSize) {
    throw new InternalError(
      `${who} sent output '${name}' of ${n} bytes, but shape [${shape.join(',')}] of ${datatype} needs ${count * info.byteSize}`,
    );
  }
  const Ctor = info.array!;
  const data = n === 0 ? new Ctor(0) : new Ctor(copy!.buffer, copy!.byteOffset + rel, count);
  return { name, datatype, shape, data };
}
