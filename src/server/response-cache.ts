import { createHash, type Hash } from 'node:crypto';
import type { FixedTypedArray } from '../core/datatypes.js';
import type { EngineRequest } from '../backends/contract.js';
import { BLS_DEPTH_PARAM } from '../backends/python/bls.js';
import type { Parameters } from '../core/inference.js';
import type { Tensor, TensorData } from '../core/tensor.js';
import type { Model } from '../repository/model.js';

/**
 * Triton's local response cache (`--cache-config=local,size=<bytes>`): whole responses of models that set
 * `response_cache { enable: true }`, keyed by a SHA-256 over the model, its version, the request's inputs
 * (name, datatype, shape, data), the outputs it asks for and its parameters. Least recently used entries go first
 * when the cache is full; a response larger than the whole cache is never stored (and said so once per model).
 *
 * Ownership: a stored response is a private copy in one buffer; a hit hands out views of it, which nobody
 * writes (protocols only encode outputs). Main thread only.
 *
 * Generations: a reload under the same name and version (new file, new config) must never be answered with the
 * old load's output, so entries belong to their owner, one load of a model version (its ModelVersion object),
 * and are stored under that owner's own id. `forget(owner)` (the load was replaced or unloaded, or an ensemble's
 * composing model was) drops them and bumps the owner's epoch: a request still running when that happened took
 * its slot before, and its insert is refused as 'stale' instead of storing an answer of a model that is gone.
 */

/** Bytes an entry is charged beyond its tensor data: per tensor (name, shape, object) and per entry (key, map). */
const TENSOR_OVERHEAD = 64;
const ENTRY_OVERHEAD = 128;

/** The entries of one owner (one load of a model version) and how often they were forgotten. */
interface Generation {
  readonly id: number;
  epoch: number;
  readonly keys: Set<string>;
}

interface Entry {
  readonly outputs: readonly Tensor[];
  readonly bytes: number;
  readonly gen: Generation;
}

/** Where one request's answer is looked up and stored: taken before the request runs. */
export interface CacheSlot {
  /** The request's key (cacheKey) under its owner's id. */
  readonly key: string;
  readonly gen: Generation;
  /** The owner's epoch when the slot was taken: a later forget makes the slot stale. */
  readonly epoch: number;
}

export type InsertResult = 'inserted' | 'too_large' | 'stale';

/** Server-wide counters (the cache's own; per-model hits and misses are in each model's statistics). */
export interface CacheCounters {
  entries: number;
  bytes: number;
  capacity: number;
  evictions: number;
}

export class ResponseCache {
  readonly capacity: number;
  /** Map order is recency: the first entry is the least recently used. */
  readonly #entries = new Map<string, Entry>();
  #bytes = 0;
  #evictions = 0;
  readonly #owners = new WeakMap<object, Generation>();
  #nextId = 0;

  constructor(capacityBytes: number) {
    this.capacity = capacityBytes;
  }

  /** The slot of the request keyed `key` to `owner` (one load of a model version). */
  slot(owner: object, key: string): CacheSlot {
    let gen = this.#owners.get(owner);
    if (gen === undefined) {
      gen = { id: this.#nextId++, epoch: 0, keys: new Set() };
      this.#owners.set(owner, gen);
    }
    return { key: `${gen.id}/${key}`, gen, epoch: gen.epoch };
  }

  /** The stored outputs for `slot` (now the most recently used), or undefined. */
  lookup(slot: CacheSlot): readonly Tensor[] | undefined {
    if (slot.epoch !== slot.gen.epoch) return undefined;
    const e = this.#entries.get(slot.key);
    if (e === undefined) return undefined;
    this.#entries.delete(slot.key);
    this.#entries.set(slot.key, e);
    return e.outputs;
  }

  /**
   * Stores a copy of `outputs`, evicting least recently used entries to make room; refuses an answer computed
   * by a load that was forgotten after the slot was taken.
   */
  insert(slot: CacheSlot, outputs: readonly Tensor[]): InsertResult {
    if (slot.epoch !== slot.gen.epoch) return 'stale';
    const { key, gen } = slot;
    const bytes = ResponseCache.sizeOf(key, outputs);
    if (bytes > this.capacity) return 'too_large';
    this.#remove(key);
    for (const [k, e] of this.#entries) {
      if (this.#bytes + bytes <= this.capacity) break;
      this.#remove(k, e);
      this.#evictions++;
    }
    this.#entries.set(key, { outputs: copyOutputs(outputs), bytes, gen });
    gen.keys.add(key);
    this.#bytes += bytes;
    return 'inserted';
  }

  /** Drops every entry of `owner` and makes the slots taken so far stale (its load was replaced or unloaded). */
  forget(owner: object): void {
    const gen = this.#owners.get(owner);
    if (gen === undefined) return;
    gen.epoch++;
    for (const k of gen.keys) this.#remove(k);
  }

  #remove(key: string, e = this.#entries.get(key)): void {
    if (e === undefined) return;
    this.#entries.delete(key);
    e.gen.keys.delete(key);
    this.#bytes -= e.bytes;
  }

  /** The bytes an entry for these outputs would take (to tell a too-large response in logs). */
  static sizeOf(key: string, outputs: readonly Tensor[]): number {
    return ENTRY_OVERHEAD + key.length + outputs.reduce((n, t) => n + TENSOR_OVERHEAD + dataBytes(t.data), 0);
  }

  counters(): CacheCounters {
    return { entries: this.#entries.size, bytes: this.#bytes, capacity: this.capacity, evictions: this.#evictions };
  }
}

/** What forgetLoad needs of the repository: the current load of a model, the ensembles whose steps run one. */
export interface LoadedModels {
  get(name: string): Model | undefined;
  dependents(name: string): string[];
}

/**
 * A load of `model` stopped serving: its cached answers go, and so do those of the ensembles whose steps run it
 * (directly or through other ensembles), which were computed with it.
 */
export function forgetLoad(cache: ResponseCache, model: Model, repo: LoadedModels): void {
  for (const v of model.versions.values()) cache.forget(v);
  const seen = new Set([model.name]);
  const pending = [model.name];
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    for (const e of repo.dependents(name)) {
      if (seen.has(e)) continue;
      seen.add(e);
      pending.push(e);
      for (const v of repo.get(e)?.versions.values() ?? []) cache.forget(v);
    }
  }
}

function dataBytes(d: TensorData): number {
  return Array.isArray(d) ? d.reduce((n, e) => n + 4 + e.byteLength, 0) : (d as FixedTypedArray).byteLength;
}

/** One copy: every fixed-size output packed into one fresh buffer, BYTES elements copied. */
function copyOutputs(outputs: readonly Tensor[]): Tensor[] {
  let fixed = 0;
  for (const t of outputs) if (!Array.isArray(t.data)) fixed += align8((t.data as FixedTypedArray).byteLength);
  const buf = new ArrayBuffer(fixed);
  let at = 0;
  return outputs.map((t): Tensor => {
    if (Array.isArray(t.data)) return { ...t, shape: [...t.shape], data: t.data.map((e) => e.slice()) };
    const src = t.data as FixedTypedArray;
    const Ctor = src.constructor as new (b: ArrayBuffer, off: number, len: number) => FixedTypedArray;
    const view = new Ctor(buf, at, src.length);
    (view as Uint8Array).set(src as Uint8Array);
    at += align8(src.byteLength);
    return { ...t, shape: [...t.shape], data: view };
  });
}

/** Views of a typed array must start at a multiple of its element size; 8 suits every type. */
const align8 = (n: number): number => (n + 7) & ~7;

function hashData(h: Hash, d: TensorData): void {
  if (Array.isArray(d)) {
    const len = Buffer.alloc(4);
    for (const e of d) {
      len.writeUInt32LE(e.byteLength);
      h.update(len);
      h.update(e);
    }
  } else {
    const f = d as FixedTypedArray;
    h.update(new Uint8Array(f.buffer, f.byteOffset, f.byteLength));
  }
}

/**
 * The key of a request to one model version: everything that decides its answer. Computed before the request
 * is scheduled (its input buffers may be moved to an engine thread afterwards).
 */
export function cacheKey(model: string, version: number, request: EngineRequest, parameters?: Parameters): string {
  const h = createHash('sha256');
  h.update(`${model}\u0000${version}\u0000${request.outputs.join('\u0001')}\u0000`);
  for (const t of request.inputs) {
    h.update(`${t.name}\u0000${t.datatype}\u0000${t.shape.join(',')}\u0000`);
    hashData(h, t.data);
  }
  if (parameters !== undefined) {
    for (const k of Object.keys(parameters).sort()) {
      // How deeply a BLS call nests does not change its answer (the server adds it: backends/python/bls.ts).
      if (k === BLS_DEPTH_PARAM) continue;
      const v = parameters[k];
      h.update(`\u0002${k}=${typeof v}:${String(v)}`);
    }
  }
  return h.digest('base64');
}
