import { errorFromData, errorToData } from '../core/errors.js';
import type { IncomingMessage } from 'node:http';
import type { MessagePort } from 'node:worker_threads';
import { InvalidArgError, type NereidError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import type { ConsoleCategory, ConsoleSources } from '../console/index.js';
import type { InferResponse } from '../core/inference.js';
import type { Lease } from '../core/lease.js';
import type { InferenceServerApi, ResolvedModel } from '../server/api.js';
import { Outbox } from './outbox.js';
import { answerSyncCalls } from './sync-call.js';
import {
  InferFlag,
  packResult,
  Tag,
  unpackInfer,
  type CallMessage,
  type ErrorMessage,
  type InferMessage,
  type ReplyMessage,
  type WireError,
} from './wire.js';
import { answerFacadeCall, isFacadeMethod, joinSignal, type SyncMethod } from './methods.js';

/** Model lookups one thread may hold tokens for (see #sync's checkModel). */
const MAX_TOKENS = 4096;

/** Where answers go: the thread's Worker (its parentPort on the other side). */
export interface Poster {
  postMessage(value: unknown, transferList?: readonly ArrayBuffer[]): void;
}

/**
 * The main thread's side of one front-end thread: answers its messages against the real InferenceServer.
 *
 * Per inference request the main thread now does only: unpack the message, one model lookup, `infer` (validation,
 * scheduling, statistics, metrics, trace: all as before), pack the result. Parsing, validation of the wire format,
 * JSON and protobuf, compression and socket I/O stay on the front-end thread.
 *
 * Model lookups: a front-end thread caches the lookups it asked for (`checkModel`, answered with a token naming
 * the lookup's identity, `ResolvedModel.key`). Each request carries the token of the lookup it was decoded with;
 * the host looks the model up afresh (the request runs on the current model, as InferenceServer.infer always did)
 * and answers `stale` when the identity differs, so the thread drops its cached entry.
 *
 * Cancellation: one AbortController here per AbortSignal id there; an ABORT message aborts it, a RELEASE message
 * (the signal was collected there) forgets it. When the thread dies, every controller aborts: nobody is left to
 * read the answers, so queued work is dropped and running work discarded, as for a client that went away.
 *
 * Lent outputs: a request asked with views (INFER's VIEWS flag) may be answered with outputs that stay in an engine's
 * memory; their larger tensors go to the thread by address (wire.ts), and the response's lease is held here until
 * the thread RETURNs it, or the thread dies. A lent response sent all by copy gives its lease back once posted.
 *
 * Threading: main thread only.
 */
export class FrontEndHost {
  readonly #api: InferenceServerApi;
  readonly #outbox: Outbox;
  readonly #logger: Logger;
  readonly #console: ConsoleSources | undefined;
  readonly #controllers = new Map<number, AbortController>();
  /** Per streaming request, the sends of its PARTIALs the thread's stream has not taken yet, oldest first. */
  readonly #untaken = new Map<number, (() => void)[]>();
  readonly #tokens = new Map<number, object>();
  #nextToken = 0;
  /** Leases of RESULTs whose outputs the thread reads by address, until it RETURNs them. */
  readonly #lent = new Map<number, Lease>();
  #nextLease = 0;
  #dead: NereidError | undefined;

  constructor(
    api: InferenceServerApi,
    port: Poster,
    sync: { port: MessagePort; flag: SharedArrayBuffer },
    logger: Logger,
    console?: ConsoleSources,
  ) {
    this.#api = api;
    this.#outbox = new Outbox((msg, transfer) => port.postMessage(msg, transfer));
    this.#logger = logger;
    this.#console = console;
    answerSyncCalls(sync.port, sync.flag, (method, args) => this.#sync(method, args));
  }

  /** Handles one message from the thread; false when it is not for the host (thread control: pool.ts). */
  handle(msg: unknown[]): boolean {
    switch (msg[0]) {
      case Tag.BATCH:
        for (const m of msg[1] as unknown[][]) {
          if (m[0] === Tag.INFER) this.#infer(m as InferMessage, msg[2] as ArrayBuffer | undefined);
          else this.handle(m);
        }
        return true;
      case Tag.INFER:
        this.#infer(msg as InferMessage, undefined);
        return true;
      case Tag.CALL:
        this.#call(msg as CallMessage);
        return true;
      case Tag.ABORT:
        this.#abort(msg[1] as number, errorFromData(msg[2] as WireError));
        return true;
      case Tag.TAKEN:
        this.#taken(msg[1] as number, msg[2] as number);
        return true;
      case Tag.RELEASE:
        for (const id of msg[1] as number[]) this.#controllers.delete(id);
        return true;
      case Tag.RETURN:
        for (const id of msg[1] as number[]) {
          this.#lent.get(id)?.release();
          this.#lent.delete(id);
        }
        return true;
      case Tag.LOG:
        this.#log(msg);
        return true;
      default:
        return false;
    }
  }

  /** The thread is gone: abort everything it asked for. Idempotent. */
  fail(err: NereidError): void {
    if (this.#dead) return;
    this.#dead = err;
    const controllers = [...this.#controllers.values()];
    this.#controllers.clear();
    for (const waiting of this.#untaken.values()) for (const r of waiting) r();
    this.#untaken.clear();
    for (const c of controllers) c.abort(err);
    // Nobody reads the lent outputs any more (a dead thread's isolate is gone with its views).
    for (const lease of this.#lent.values()) lease.release();
    this.#lent.clear();
  }

  /** Leases held for the thread now (tests and leak checks). */
  get lent(): number {
    return this.#lent.size;
  }

  #signal(id: number): AbortSignal | undefined {
    if (id === 0) return undefined;
    let c = this.#controllers.get(id);
    if (c === undefined) {
      c = new AbortController();
      if (this.#dead) c.abort(this.#dead);
      else this.#controllers.set(id, c);
    }
    return c.signal;
  }

  /** The thread's stream took `n` more PARTIALs of request `id`: their sends are done. */
  #taken(id: number, n: number): void {
    const waiting = this.#untaken.get(id);
    for (let k = 0; k < n && waiting !== undefined && waiting.length > 0; k++) waiting.shift()?.();
    if (waiting?.length === 0) this.#untaken.delete(id);
  }

  #abort(id: number, reason: NereidError): void {
    let c = this.#controllers.get(id);
    if (c === undefined && !this.#dead) this.#controllers.set(id, (c = new AbortController()));
    c?.abort(reason);
  }

  #infer(msg: InferMessage, arena: ArrayBuffer | undefined): void {
    const id = msg[1];
    const token = msg[3];
    let stale = false;
    const fail = (err: unknown): void => {
      const reply: ErrorMessage = [Tag.ERROR, id, stale, errorToData(err)];
      this.#outbox.send(reply);
    };
    let resolved: ResolvedModel;
    let request;
    try {
      request = unpackInfer(msg, arena);
      resolved = this.#api.checkModel(request.model, request.version);
    } catch (err) {
      stale = token !== 0 && this.#tokens.delete(token);
      return fail(err);
    }
    if (token !== 0 && this.#tokens.get(token) !== (resolved.key ?? resolved)) {
      stale = true;
      this.#tokens.delete(token);
    }
    // A streaming caller there: each of a decoupled model's responses goes out as it comes, in order before the
    // RESULT (one outbox). Only decoupled models call it; the others answer with the RESULT alone.
    const onResponse =
      (msg[4] & InferFlag.STREAMING) === 0
        ? undefined
        : (response: InferResponse): Promise<void> | undefined => {
            if (this.#dead) return undefined;
            const { msg: partial, transfer } = packResult(id, false, response, this.#outbox.arena, Tag.PARTIAL);
            this.#outbox.send(partial, transfer, fail);
            // Settled by the thread's TAKEN (its stream's client read it), or when the request ends.
            return new Promise<void>((resolve) => {
              const waiting = this.#untaken.get(id);
              if (waiting === undefined) this.#untaken.set(id, [resolve]);
              else waiting.push(resolve);
            });
          };
    const settle = (): void => {
      for (const r of this.#untaken.get(id) ?? []) r();
      this.#untaken.delete(id);
    };
    const views = (msg[4] & InferFlag.VIEWS) !== 0;
    this.#api.infer(request, { signal: this.#signal(msg[2]), resolved, onResponse, views }).then(
      (response) => {
        settle();
        if (this.#dead) return response.lease?.release();
        this.#answer(id, stale, response, fail);
      },
      (err: unknown) => {
        settle();
        fail(err);
      },
    );
  }

  /** The RESULT of an infer: a lent response's lease is held for the thread while it reads outputs by address. */
  #answer(id: number, stale: boolean, response: InferResponse, fail: (err: unknown) => void): void {
    const lease = response.lease;
    const leaseId = lease === undefined ? 0 : ++this.#nextLease;
    try {
      const { msg, transfer, byAddress } = packResult(id, stale, response, this.#outbox.arena, Tag.RESULT, leaseId);
      if (!byAddress) {
        // Copies only: the arena reads the lent memory when the post goes out, and not after.
        this.#outbox.send(msg, transfer, fail, lease && (() => lease.release()));
        return;
      }
      this.#lent.set(leaseId, lease!);
      this.#outbox.send(msg, transfer, (err) => {
        // Not sent: the thread will never return it.
        this.#lent.delete(leaseId);
        lease!.release();
        fail(err);
      });
    } catch (err) {
      lease?.release();
      fail(err);
    }
  }

  /** An async facade call: dispatched by its row in FACADE_METHODS, its options given this side's signal. */
  #call([, id, signalId, method, args]: CallMessage): void {
    const reply = (ok: boolean, value: unknown): void => {
      const msg: ReplyMessage = [Tag.REPLY, id, ok, value];
      this.#outbox.send(msg, undefined, (err) => this.#outbox.send([Tag.REPLY, id, false, errorToData(err)]));
    };
    let run: Promise<unknown>;
    try {
      if (!isFacadeMethod(method, 'async')) throw new InvalidArgError(`unknown call '${String(method)}'`);
      run = answerFacadeCall(this.#api, method, joinSignal(args, this.#signal(signalId)));
    } catch (err) {
      run = Promise.reject(err);
    }
    run.then(
      (value) => reply(true, value),
      (err: unknown) => reply(false, errorToData(err)),
    );
  }

  /** A sync call: the ones answered here by name, then any sync row of FACADE_METHODS. */
  #sync(method: SyncMethod, args: unknown[]): unknown {
    switch (method) {
      case 'checkModel':
        return this.#checkModel(args[0] as string, args[1] as string | undefined);
      case 'consoleLogs': {
        const logs = this.#console?.logs;
        if (logs === undefined) throw new InvalidArgError('this server keeps no log lines for the console');
        return logs.json(args[0] as number | undefined);
      }
      case 'consoleLatency':
        return this.#console?.latency.summary(args[0] as number) ?? [];
      case 'consoleAccess':
        // The thread's request as plain data: the rule reads its method, url and headers (ConsoleAccess).
        return this.#console?.access?.(args[0] as IncomingMessage, args[1] as ConsoleCategory);
    }
    if (!isFacadeMethod(method, 'sync')) throw new InvalidArgError(`unknown call '${String(method)}'`);
    return answerFacadeCall(this.#api, method, args);
  }

  /** A lookup for the thread's cache, with a token naming its identity (see the class comment). */
  #checkModel(name: string, version: string | undefined): ResolvedModel & { token: number } {
    const r = this.#api.checkModel(name, version);
    const token = ++this.#nextToken;
    this.#tokens.set(token, r.key ?? r);
    // Only version strings that resolve make a token ("1", "01", "001": all version 1), but a client could
    // still grow the map: past MAX_TOKENS the oldest go, and a request carrying one is answered `stale`.
    if (this.#tokens.size > MAX_TOKENS) this.#tokens.delete(this.#tokens.keys().next().value as number);
    return {
      name: r.name,
      version: r.version,
      maxBatchSize: r.maxBatchSize,
      inputs: r.inputs,
      decoupled: r.decoupled,
      token,
    };
  }

  /** A front-end thread's log record, written by the server's logger (its switches and destination apply). */
  #log([, level, bindings, obj, message]: unknown[]): void {
    const logger =
      Object.keys(bindings as object).length > 0
        ? this.#logger.child(bindings as object as Record<string, unknown>)
        : this.#logger;
    const write = logger[level as 'error' | 'warn' | 'info' | 'debug' | 'trace'];
    if (typeof write === 'function') write.call(logger, obj as object, message as string | undefined);
  }
}
