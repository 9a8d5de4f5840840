import { errorFromData, errorToData } from '../core/errors.js';
import type { MessagePort } from 'node:worker_threads';
import { NereidError } from '../core/errors.js';
import type { InferRequest, InferResponse } from '../core/inference.js';
import { SharedLease } from '../core/lease.js';
import type { FacadeMethod, InferenceServerApi, InferOptions, ResolvedModel, ServerMetadata } from '../server/api.js';
import { forwardingApi, splitSignal, type AsyncMethod } from './methods.js';
import { Outbox } from './outbox.js';
import type { SyncCaller } from './sync-call.js';
import {
  InferFlag,
  packInfer,
  Tag,
  unpackResult,
  type CallMessage,
  type ErrorMessage,
  type ReplyMessage,
  type ResultMessage,
} from './wire.js';

/**
 * The InferenceServerApi of a front-end thread: every call is forwarded to the one InferenceServer on the main
 * thread, so the protocol code runs here unchanged while models, schedulers and batchers stay in one place (dynamic
 * batching sees every request of a model, whichever thread parsed it).
 * - infer, loadModel, unloadModel: messages on the thread's port; the answer settles the promise. A request's
 *   tensor buffers are transferred or copied once (wire.ts): the caller must not touch its request afterwards.
 *   A decoupled model's responses (infer with `onResponse`) arrive as PARTIAL messages before the RESULT.
 * - client shared memory: the registry of regions is the main thread's (one per process, so a region registered
 *   through one thread serves requests arriving on any other); its calls are synchronous like the rest, and an
 *   input or output in a region crosses as its reference, the main thread reading and writing the bytes.
 * - the synchronous methods: sync-call.ts (the thread sleeps until the main thread answers).
 * - checkModel, on every inference request: answered from a cache of this thread's lookups. The main thread looks
 *   the model up again for each request anyway (as InferenceServer.infer always did) and says when the lookup this
 *   thread used has gone stale (a reload, an unload, a newer version for "latest"); the entry is then dropped.
 *   Until then one request may be decoded with the old lookup: it is validated against the current model on the
 *   main thread, so at worst it is refused (an unknown model answers NOT_FOUND there, as here).
 * - AbortSignals: one id per signal (an HTTP connection's, a gRPC call's), one listener per signal for its life;
 *   its abort crosses as one message, and its id is released when the signal is garbage collected.
 *
 * Threading: lives in its front-end thread; `handle` is fed the main thread's answers by thread.ts.
 */

const MAX_LOOKUPS = 1024;

interface Pending {
  resolve(value: unknown): void;
  reject(err: unknown): void;
  /** Keeps the signal (and so its id on the main thread) alive while the call is in flight. */
  signal: AbortSignal | undefined;
  /** The cached lookup this request used, to drop when the main thread says it went stale. */
  lookup: Lookup | undefined;
  /**
   * A streaming caller's callback for a decoupled model's responses. Its promise (taken by the client) does not
   * cross back to the main thread: there the model is not held, and this thread's stream limits bound what piles up.
   */
  onResponse?: (response: InferResponse) => void | Promise<void>;
}

/** A model lookup as the main thread answers it, with the token naming it there. */
interface Lookup extends ResolvedModel {
  readonly token: number;
}

/** Rows of FACADE_METHODS this proxy answers itself: checkModel from its cache, metadata asked once. */
type OwnMethods = 'checkModel' | 'metadata';

export class ProxyServerApi extends forwardingApi<OwnMethods>() implements InferenceServerApi {
  readonly #outbox: Outbox;
  readonly #sync: SyncCaller;
  readonly #pending = new Map<number, Pending>();
  #nextId = 0;
  /** model name → version ('' = latest) → lookup. */
  readonly #lookups = new Map<string, Map<string, Lookup>>();
  #lookupCount = 0;
  #metadata: ServerMetadata | undefined;
  readonly #signals = new WeakMap<AbortSignal, number>();
  #nextSignal = 0;
  #released: number[] = [];
  readonly #collected = new FinalizationRegistry<number>((id) => this.#release(id));
  #failed: NereidError | undefined;

  /** `afterPost`: called after each post to the main thread (thread.ts: the spin for the answers, answer-spin.ts). */
  constructor(port: MessagePort, sync: SyncCaller, afterPost?: () => void) {
    super();
    this.#outbox = new Outbox((msg, transfer) => port.postMessage(msg, transfer), afterPost);
    this.#sync = sync;
  }

  /** Feeds an answer from the main thread; false when `msg` is not one. */
  handle(msg: unknown[]): boolean {
    const tag = msg[0];
    if (tag === Tag.BATCH) {
      for (const m of msg[1] as unknown[][]) this.#answer(m, msg[2] as ArrayBuffer | undefined);
      return true;
    }
    return this.#answer(msg, undefined);
  }

  #answer(msg: unknown[], arena: ArrayBuffer | undefined): boolean {
    const tag = msg[0];
    if (tag !== Tag.RESULT && tag !== Tag.ERROR && tag !== Tag.REPLY && tag !== Tag.PARTIAL) return false;
    const p = this.#pending.get(msg[1] as number);
    if (p === undefined) {
      // Nobody waits for it (the thread gave the call up): what it lent goes straight back.
      if (tag === Tag.RESULT) this.#giveBack((msg as ResultMessage)[7]);
      return true;
    }
    if (tag === Tag.PARTIAL) {
      // Not settled: the RESULT (or ERROR) that ends the request follows. A callback that throws is the
      // protocol's bug for that request alone; its error settles the request so the stream answers it.
      try {
        const taken = p.onResponse?.(unpackResult(msg as ResultMessage, arena));
        const id = msg[1] as number;
        // The stream's client read it (or the stream has no backpressure): the model may send on.
        if (taken === undefined) this.#outbox.send([Tag.TAKEN, id, 1]);
        else
          taken.then(
            () => this.#outbox.send([Tag.TAKEN, id, 1]),
            () => this.#outbox.send([Tag.TAKEN, id, 1]),
          );
      } catch (err) {
        this.#pending.delete(msg[1] as number);
        p.reject(NereidError.from(err));
      }
      return true;
    }
    this.#pending.delete(msg[1] as number);
    if (tag === Tag.REPLY) {
      const [, , ok, value] = msg as ReplyMessage;
      if (ok) p.resolve(value);
      else p.reject(errorFromData(value as ErrorMessage[3]));
      return true;
    }
    if ((msg as ResultMessage | ErrorMessage)[2] && p.lookup !== undefined) this.#forget(p.lookup);
    if (tag === Tag.RESULT) this.#settle(p, msg as ResultMessage, arena);
    else p.reject(errorFromData((msg as ErrorMessage)[3]));
    return true;
  }

  /**
   * Resolves with a RESULT; one the thread cannot read (a tensor that does not decode) fails its request instead,
   * and what it lent goes back at once, not with the thread.
   */
  #settle(p: Pending, msg: ResultMessage, arena: ArrayBuffer | undefined): void {
    let response: InferResponse;
    try {
      response = this.#result(msg, arena);
    } catch (err) {
      this.#giveBack(msg[7]);
      p.reject(NereidError.from(err));
      return;
    }
    p.resolve(response);
  }

  /** A RESULT as the caller gets it: one that lent outputs by address carries the lease to give them back with. */
  #result(msg: ResultMessage, arena: ArrayBuffer | undefined): InferResponse {
    const response = unpackResult(msg, arena);
    const leaseId = msg[7];
    // Given back once, however often the caller releases it.
    if (leaseId !== 0) response.lease = new SharedLease(1, () => this.#giveBack(leaseId)).share();
    return response;
  }

  /** The outputs lent under `leaseId` are read no more (0: none were lent). */
  #giveBack(leaseId: number): void {
    if (leaseId !== 0 && !this.#failed) this.#outbox.send([Tag.RETURN, [leaseId]]);
  }

  /** Fails every call in flight and every later one with `err` (the thread is going down). */
  failAll(err: NereidError): void {
    this.#failed ??= err;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) p.reject(err);
  }

  get inflight(): number {
    return this.#pending.size;
  }

  infer(request: InferRequest, opts: InferOptions = {}): Promise<InferResponse> {
    if (this.#failed) return Promise.reject(this.#failed);
    const lookup = opts.resolved as Lookup | undefined;
    const id = ++this.#nextId;
    const signal = opts.signal;
    let packed: ReturnType<typeof packInfer>;
    try {
      const flags = (opts.onResponse ? InferFlag.STREAMING : 0) | (opts.views === true ? InferFlag.VIEWS : 0);
      packed = packInfer(id, this.#signalId(signal), lookup?.token ?? 0, flags, request, this.#outbox.arena);
    } catch (err) {
      return Promise.reject(NereidError.from(err));
    }
    const onResponse = opts.onResponse;
    const answer = new Promise<InferResponse>((resolve, reject) =>
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject, signal, lookup, onResponse }),
    );
    this.#outbox.send(packed.msg, packed.transfer, (err) => this.#fail(id, err));
    return answer;
  }

  /** A call that could not be sent. */
  #fail(id: number, err: unknown): void {
    const p = this.#pending.get(id);
    this.#pending.delete(id);
    p?.reject(NereidError.from(err));
  }

  checkModel(name: string, version?: string): ResolvedModel {
    const v = version ?? '';
    const hit = this.#lookups.get(name)?.get(v);
    if (hit !== undefined) return hit;
    const lookup = Object.freeze(this.#sync.call<Lookup>('checkModel', [name, version]));
    // Bounded like the main thread's tokens (host.ts): many spellings of one version each make an entry.
    if (++this.#lookupCount > MAX_LOOKUPS) {
      this.#lookups.clear();
      this.#lookupCount = 1;
    }
    let versions = this.#lookups.get(name);
    if (versions === undefined) this.#lookups.set(name, (versions = new Map()));
    versions.set(v, lookup);
    return lookup;
  }

  #forget(lookup: Lookup): void {
    for (const [name, versions] of this.#lookups) {
      for (const [v, l] of versions) if (l === lookup) versions.delete(v);
      if (versions.size === 0) this.#lookups.delete(name);
    }
  }

  #signalId(signal: AbortSignal | undefined): number {
    if (signal === undefined) return 0;
    let id = this.#signals.get(signal);
    if (id !== undefined) return id;
    const sid = (id = ++this.#nextSignal);
    this.#signals.set(signal, sid);
    this.#collected.register(signal, sid);
    const abort = (): void => this.#outbox.send([Tag.ABORT, sid, errorToData(signal.reason)]);
    if (signal.aborted) abort();
    else signal.addEventListener('abort', abort, { once: true });
    return sid;
  }

  /** Signal ids whose signals were collected go back together, once per turn of the event loop. */
  #release(id: number): void {
    this.#released.push(id);
    if (this.#released.length > 1) return;
    setImmediate(() => {
      const ids = this.#released;
      this.#released = [];
      this.#outbox.send([Tag.RELEASE, ids]);
    }).unref();
  }

  protected forwardSync(method: FacadeMethod<'sync'>, args: unknown[]): unknown {
    return this.#sync.call(method, args);
  }

  protected async forwardAsync(method: AsyncMethod, args: unknown[]): Promise<unknown> {
    if (this.#failed) throw this.#failed;
    const { args: sent, signal } = splitSignal(args);
    const id = ++this.#nextId;
    const answer = new Promise<unknown>((resolve, reject) =>
      this.#pending.set(id, { resolve, reject, signal, lookup: undefined }),
    );
    const msg: CallMessage = [Tag.CALL, id, this.#signalId(signal), method, sent];
    this.#outbox.send(msg, undefined, (err) => this.#fail(id, err));
    const value = await answer;
    // Async calls load and unload models: lookups of other models may have changed with them (a dependent). The
    // main thread corrects any this misses.
    this.#lookups.clear();
    return value;
  }

  /** The server's name, version and extensions never change while it runs: asked once. */
  metadata(): ServerMetadata {
    this.#metadata ??= this.#sync.call<ServerMetadata>('metadata', []);
    return this.#metadata;
  }

  /** The server belongs to the main thread; a front end never closes it. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
