import type { DeviceMemory } from '../../../core/device.js';
import {
  CancelledError,
  errorFromCompact,
  InternalError,
  NereidError,
  UnavailableError,
} from '../../../core/errors.js';
import type { Lease } from '../../../core/lease.js';
import type { Tensor } from '../../../core/tensor.js';
import type { EngineRequest, EngineResponse, ExecuteTimings, Instance, Responder } from '../../contract.js';
import type { ChildProcessHost, HostedInstance } from './child.js';
import { deviceWire, hostCopiesWithoutIpc } from './device.js';
import type { FromChild } from './protocol.js';
import type { ProcessInstanceOptions } from './instance-options.js';
import { deliver, newBatch, rescheduled, settle, wireRequests, type Inflight } from './batch.js';
import { writeTensorGroups, writeTensorGroupsByName } from './wire.js';
import { readChildAnswer } from './child-answer.js';

/**
 * The host side of one instance living in a child process: `execute` writes the batch's inputs into one
 * shared-memory block and sends `exec`; the child answers with `resp` (one response, decoupled or through a
 * response sender) and `done` (execute returned: the batch's responses when the model returned them, its timings,
 * or its error). Health: the process's exit, or a deadline on `execute` (the process is killed), fails what is in
 * flight with INTERNAL naming the instance and settles `died`.
 *
 * Threading: main thread only. Ownership: inputs are copied into shared memory before `execute` returns control,
 * so the caller's buffers are never kept; outputs are copied out of the child's block into one new ArrayBuffer
 * per message and given to the responder — or, for requests that take views, view the block under a lease. With `deviceMemory`, tensors in client CUDA memory on that device
 * cross as IPC handle + offset instead (process/device.ts): the child reads and writes them in place.
 */

export type { ProcessInstanceOptions } from './instance-options.js';

const now = (): bigint => process.hrtime.bigint();

export class ProcessInstance implements Instance, HostedInstance {
  readonly name: string;
  readonly deviceMemory: DeviceMemory | undefined;
  readonly died: Promise<Error>;
  readonly #host: ChildProcessHost;
  readonly #opts: ProcessInstanceOptions;
  readonly #id: number;
  readonly #batches = new Map<number, Inflight>();
  #nextBatch = 0;
  #dead: Error | undefined;
  #destroying: Promise<void> | undefined;
  #resolveDied!: (e: Error) => void;
  #execSince = 0;
  #watchdog: NodeJS.Timeout | undefined;
  #init: { resolve: () => void; reject: (e: Error) => void } | undefined;
  #fini: (() => void) | undefined;

  private constructor(host: ChildProcessHost, opts: ProcessInstanceOptions) {
    this.name = opts.name;
    this.deviceMemory = opts.deviceMemory;
    this.#host = host;
    this.#opts = opts;
    this.died = new Promise((resolve) => (this.#resolveDied = resolve));
    this.#id = host.attach(this);
  }

  /** The process this instance lives in (tests kill it to check the health rules). */
  get pid(): number {
    return this.#host.pid;
  }

  /**
   * Creates the instance in `host` (the child imports the model and runs its initialize). Rejects with the
   * child's error (the model's exception as `Type: message`); an abort kills the process, since initialize
   * cannot be interrupted.
   */
  static async create(
    host: ChildProcessHost,
    opts: ProcessInstanceOptions,
    signal?: AbortSignal,
  ): Promise<ProcessInstance> {
    const inst = new ProcessInstance(host, opts);
    const onAbort = (): void => host.kill(`was killed: the load of instance ${opts.name} was cancelled`);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await new Promise<void>((resolve, reject) => {
        inst.#init = { resolve, reject };
        if (host.exitCause !== undefined) reject(host.exitCause);
        else host.send({ op: 'init', inst: inst.#id, payload: opts.payload });
      });
    } catch (e) {
      host.detach(inst.#id);
      if (signal?.aborted) throw new CancelledError(`creation of instance ${opts.name} was cancelled`);
      throw e;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    if (opts.executeTimeoutMs > 0) {
      const every = Math.max(50, Math.min(1000, opts.executeTimeoutMs / 4));
      inst.#watchdog = setInterval(() => inst.#checkDeadline(), every);
      inst.#watchdog.unref();
    }
    return inst;
  }

  execute(given: readonly EngineRequest[], responder: Responder, signal: AbortSignal): Promise<ExecuteTimings> {
    if (this.#dead !== undefined) return Promise.reject(this.#dead);
    if (this.#destroying !== undefined) {
      return Promise.reject(new UnavailableError(`instance ${this.name} is being destroyed`));
    }
    if (signal.aborted) return Promise.reject(new CancelledError('request was cancelled before execution'));
    const t0 = now();
    let blk: [number, number, number] | null;
    let descs;
    let requests = given;
    let device;
    try {
      requests = hostCopiesWithoutIpc(given);
      const write = this.#opts.inputLayout === 'name' ? writeTensorGroupsByName : writeTensorGroups;
      ({ blk, descs } = write(
        this.#host.arena,
        requests.map((r) => r.inputs),
      ));
      device = deviceWire(requests, descs);
    } catch (e) {
      return Promise.reject(NereidError.from(e));
    }
    const wire = wireRequests(requests, descs, device?.slots);
    const id = this.#nextBatch++;
    const onAbort = (): void => this.#host.send({ op: 'cancel', inst: this.#id, b: id });
    const batch = newBatch(id, requests, responder, signal, onAbort, Number(now() - t0));
    this.#batches.set(id, batch);
    signal.addEventListener('abort', onAbort, { once: true });
    this.#execSince = performance.now();
    if (device !== undefined) {
      this.#host.cudaRegions.note(device.spans);
      this.#host.send({ op: 'exec', inst: this.#id, b: id, blk, r: wire, cuda: device.cuda });
    } else this.#host.send({ op: 'exec', inst: this.#id, b: id, blk, r: wire });
    return batch.promise;
  }

  // -- messages from the child ----------------------------------------------------------------------------------

  onMessage(msg: FromChild): void {
    switch (msg.op) {
      case 'resp':
        this.#onResp(msg);
        return;
      case 'done':
        this.#onDone(msg);
        return;
      case 'inited': {
        const p = this.#init;
        this.#init = undefined;
        p?.resolve();
        return;
      }
      case 'init_error': {
        const p = this.#init;
        this.#init = undefined;
        if (msg.tb) this.#opts.logger.error(`initialize() of instance ${this.name} failed:\n${msg.tb}`);
        const e = errorFromCompact(msg.e, 'initialize failed');
        p?.reject(
          new (e.constructor as typeof InternalError)(`instance ${this.name}: initialize() failed: ${e.message}`),
        );
        return;
      }
      case 'finied':
        if (msg.tb) this.#opts.logger.warn(`finalize() of instance ${this.name} raised:\n${msg.tb}`);
        this.#fini?.();
        return;
      default:
        this.#opts.logger.warn({ op: msg.op }, `instance ${this.name}: unexpected '${msg.op}' message`);
    }
  }

  #who(): string {
    return `instance ${this.name} (${this.#host.label})`;
  }

  #onResp(msg: Extract<FromChild, { op: 'resp' }>): void {
    const b = this.#batches.get(msg.b);
    if (b === undefined || !Number.isInteger(msg.i) || msg.i < 0 || msg.i >= b.requests.length) {
      if (msg.blk) this.#host.freeLater(msg.blk[0], msg.blk[1], 0);
      return;
    }
    const t0 = now();
    let resp: EngineResponse | Error | null;
    if (msg.e) resp = errorFromCompact(msg.e, 'model error');
    else if (msg.none) resp = null;
    else {
      try {
        const req = b.requests[msg.i];
        const r = readChildAnswer(this.#host, msg.blk, [msg], [req.device?.outputs], req.viewsOk === true, this.#who());
        resp = { outputs: r.tensors[0] };
        if (r.leases) resp.lease = r.leases[0];
        if (msg.p) resp.parameters = msg.p;
      } catch (e) {
        resp = NereidError.from(e);
      }
    }
    if (resp === null && msg.fin && !this.#opts.decoupled) {
      resp = new InternalError(
        `Failed to process the request(s) for model instance '${this.name}', message: the model sent TRITONSERVER_RESPONSE_COMPLETE_FINAL without a response for request ${msg.i}; a model that is not decoupled answers every request exactly once`,
      );
    }
    const taken = deliver(b, msg.i, resp, msg.fin === true, this.#opts.check);
    // Every non-final response the child wrote counts against its sender's window until its client took it.
    if (msg.fin !== true && msg.none !== true && msg.e === undefined) this.#tookWhen(taken, msg.b, msg.i);
    if (b.timings !== undefined) b.timings.computeOutputNs += Number(now() - t0);
    this.#maybeSettle(b);
  }

  #onDone(msg: Extract<FromChild, { op: 'done' }>): void {
    const b = this.#batches.get(msg.b);
    if (b === undefined) {
      if (msg.blk) this.#host.freeLater(msg.blk[0], msg.blk[1], 0);
      return;
    }
    this.#execSince = 0;
    const t0 = now();
    const [inNs, inferNs, outNs] = Array.isArray(msg.t) ? msg.t : [0, 0, 0];
    b.returned = true;
    if (msg.err) {
      this.#finish(b);
      b.reject(errorFromCompact(msg.err, `instance ${this.name}: execute failed`));
      return;
    }
    if (msg.r) {
      let read: { tensors: Tensor[][]; leases?: Lease[] } | undefined;
      let readError: Error | undefined;
      try {
        read = readChildAnswer(
          this.#host,
          msg.blk,
          msg.r,
          b.requests.map((r) => r.device?.outputs),
          b.requests.every((r) => r.viewsOk === true),
          this.#who(),
        );
      } catch (e) {
        readError = NereidError.from(e);
      }
      msg.r.forEach((r, i) => {
        const lease = read?.leases?.[i];
        if (r === null || i >= b.requests.length || r.e || readError) lease?.release();
        if (r === null || i >= b.requests.length) return;
        if (r.e) this.#deliver(b, i, errorFromCompact(r.e, 'model error'), true);
        else if (readError) this.#deliver(b, i, readError, true);
        else {
          const resp: EngineResponse = { outputs: read!.tensors[i] };
          if (r.p) resp.parameters = r.p;
          if (lease) resp.lease = lease;
          this.#deliver(b, i, resp, true);
        }
      });
    }
    for (const i of Array.isArray(msg.rs) ? msg.rs : []) rescheduled(b, i, this.name);
    if (!this.#opts.decoupled) {
      for (let i = 0; i < b.requests.length; i++) {
        if (!b.final[i]) {
          this.#deliver(
            b,
            i,
            new InternalError(
              `Failed to process the request(s) for model instance '${this.name}', message: execute() returned None but sent no final response for request ${i}`,
            ),
            true,
          );
        }
      }
    }
    b.timings = {
      computeInputNs: b.hostInNs + inNs,
      computeInferNs: inferNs,
      computeOutputNs: outNs + Number(now() - t0),
    };
    this.#maybeSettle(b);
  }

  /** Tells the child when request `i` of batch `b` had a response taken (at once, or when `taken` settles). */
  #tookWhen(taken: void | Promise<void>, b: number, i: number): void {
    const took = (): void => {
      if (this.#dead === undefined) this.#host.send({ op: 'took', inst: this.#id, b, i });
    };
    if (taken === undefined) took();
    else void taken.then(took, took);
  }

  #deliver(b: Inflight, index: number, resp: EngineResponse | Error | null, final: boolean): void {
    void deliver(b, index, resp, final, this.#opts.check);
  }

  #maybeSettle(b: Inflight): void {
    if (settle(b, this.#opts.decoupled)) this.#finish(b);
  }

  #failOpen(b: Inflight, err: Error): void {
    for (let i = 0; i < b.requests.length; i++) if (!b.final[i]) this.#deliver(b, i, err, true);
  }

  #finish(b: Inflight): void {
    this.#batches.delete(b.id);
    b.signal.removeEventListener('abort', b.onAbort);
    b.final.fill(true);
    b.open = 0;
  }

  #checkDeadline(): void {
    if (this.#execSince === 0 || this.#dead !== undefined) return;
    const limit = this.#opts.executeTimeoutMs;
    if (performance.now() - this.#execSince > limit) {
      this.#host.kill(`did not return from execute within ${formatMs(limit)} and was killed`);
    }
  }

  // -- health -----------------------------------------------------------------------------------------------------

  onExit(how: string): void {
    if (this.#dead !== undefined) return;
    const err = new InternalError(`instance ${this.name} (${this.#host.label}) ${how}`);
    this.#dead = err;
    clearInterval(this.#watchdog);
    this.#init?.reject(err);
    this.#init = undefined;
    for (const b of [...this.#batches.values()]) {
      if (b.resolved) this.#failOpen(b, err);
      this.#finish(b);
      b.reject(err);
    }
    this.#fini?.();
    if (this.#destroying === undefined) {
      this.#opts.logger.error({ childPid: this.#host.pid }, err.message);
      this.#resolveDied(err);
    }
  }

  /** Waits for the batch in flight, asks the child to finalize, then closes (or kills) its process. Idempotent. */
  destroy(): Promise<void> {
    this.#destroying ??= this.#destroy();
    return this.#destroying;
  }

  async #destroy(): Promise<void> {
    await Promise.all(
      [...this.#batches.values()].map(
        (b) =>
          (b.settled ??= b.promise.then(
            () => undefined,
            () => undefined,
          )),
      ),
    );
    clearInterval(this.#watchdog);
    const grace = this.#opts.destroyGraceMs;
    if (this.#dead === undefined) {
      const finalized = new Promise<void>((resolve) => (this.#fini = resolve));
      this.#host.send({ op: 'fini', inst: this.#id });
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), grace);
        timer.unref();
      });
      if (await Promise.race([finalized.then(() => false), timedOut])) {
        this.#opts.logger.warn(
          `instance ${this.name}: finalize() did not return within ${formatMs(grace)}; killing ${this.#host.label}`,
        );
        this.#host.kill(`was killed: finalize() of instance ${this.name} did not return within ${formatMs(grace)}`);
      }
      clearTimeout(timer);
      // Decoupled requests the model never finished cannot be answered any more.
      for (const b of [...this.#batches.values()]) {
        this.#failOpen(b, new UnavailableError(`instance ${this.name} was unloaded before it finished this request`));
        this.#finish(b);
      }
    }
    this.#host.detach(this.#id);
    if (this.#opts.ownsProcess || this.#host.instanceCount === 0) await this.#host.close(grace);
  }
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}
