import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { CancelledError, InternalError, UnavailableError } from '../../../core/errors.js';
import type { Logger } from '../../../core/logger.js';
import { channelPair, type ChannelPair } from './channel.js';
import { ChildCudaRegions } from './device.js';
import { FrameDecoder, encodeFrame } from './frame.js';
import type { FreeList, FromChild, ToChild } from './protocol.js';
import { HostArena, PeerSegments, unlinkSegments, type ShmOptions } from './shm.js';
import { forwardLines } from './child-output.js';

/**
 * One child process that hosts one or more instances (the Python backend: one per instance, as Triton; the
 * TensorRT backend: one per GPU). Owns the process, the control channel (an inherited Unix socket on fd 3, so the
 * model's own stdout/stderr stay free for its prints), the host's shared-memory segments and the mapping of the
 * child's. The child is started as `<command> <args...> --fd 3 --prefix <p> --shm-default-byte-size <n>
 * --shm-growth-byte-size <n>` and must first send `ready`.
 *
 * Threading: everything runs on the main thread; child messages arrive as socket events.
 */

export interface ChildOptions {
  /** What the child is, for messages: `python process` → "python process 1234". */
  kind: string;
  command: string;
  args: readonly string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  shm: ShmOptions;
  /** How long the child may take to start and say `ready` (Triton's stub-timeout-seconds). */
  startTimeoutMs: number;
  logger: Logger;
}

/** What an instance hosted by the process receives from it. */
export interface HostedInstance {
  onMessage(msg: FromChild): void;
  /** The process died (or was killed); `how` completes "<label> …" ("exited with signal SIGSEGV"). */
  onExit(how: string): void;
}

/** Child → host messages the transport does not handle itself (BLS calls, say), for the backend. */
export type ServiceHandler = (msg: FromChild, host: ChildProcessHost) => void;

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Spawns the child with its end of the channel as fd 3; its output goes to the log (stderr's tail kept). */
function spawnChild(opts: ChildOptions): { child: ChildProcess; channel: ChannelPair; stderrTail: string[] } {
  const args = [
    ...opts.args,
    '--fd',
    '3',
    '--prefix',
    opts.shm.prefix,
    '--shm-default-byte-size',
    String(opts.shm.defaultByteSize),
    '--shm-growth-byte-size',
    String(opts.shm.growthByteSize),
  ];
  const channel = channelPair();
  let child: ChildProcess;
  try {
    child = spawn(opts.command, args, {
      stdio: ['ignore', 'pipe', 'pipe', channel.childFd],
      env: opts.env,
      cwd: opts.cwd,
    });
  } finally {
    // The child has its own copy now (or there is no child): ours would keep the channel open past its exit.
    channel.releaseChildEnd();
  }
  const stderrTail: string[] = [];
  forwardLines(child, opts.logger, stderrTail);
  return { child, channel, stderrTail };
}

/**
 * Child blocks held back before the host sends an explicit `free` (otherwise the hand-backs ride on the next
 * message, costing nothing): a decoupled model streaming many responses must get its memory back without waiting
 * for the next batch.
 */
const FREE_FLUSH_COUNT = 64;

export class ChildProcessHost {
  readonly pid: number;
  readonly label: string;
  readonly arena: HostArena;
  readonly peer: PeerSegments;
  /** Versions the child reported in `ready` (interpreter, numpy). */
  readonly info: Readonly<Record<string, unknown>>;
  /** Settles when the process has exited, for any reason. */
  readonly exited: Promise<ExitInfo>;
  services: ServiceHandler | undefined;
  /** Client CUDA regions the child was told about, closed there when the server closes them. */
  readonly cudaRegions: ChildCudaRegions;

  readonly #child: ChildProcess;
  readonly #sock: Socket;
  readonly #opts: ChildOptions;
  readonly #instances = new Map<number, HostedInstance>();
  #nextInst = 0;
  #pendingFree: FreeList = [];
  #pendingFreeBytes = 0;
  #closing: Promise<void> | undefined;
  #exitCause: Error | undefined;
  #exitHow: string | undefined;
  /** Set before a deliberate kill, so instances report why (a deadline) rather than just the signal. */
  #killReason: string | undefined;
  #oneShot: { resolve: (m: FromChild) => void; reject: (e: Error) => void } | undefined;
  #gone = false;

  readonly #channel: ChannelPair;

  private constructor(
    child: ChildProcess,
    channel: ChannelPair,
    opts: ChildOptions,
    ready: { pid: number } & Record<string, unknown>,
  ) {
    this.#child = child;
    this.#opts = opts;
    this.#channel = channel;
    this.#sock = channel.socket;
    this.pid = child.pid ?? ready.pid;
    this.label = `${opts.kind} ${this.pid}`;
    this.info = Object.freeze({ ...ready });
    this.arena = new HostArena(opts.shm);
    this.peer = new PeerSegments(opts.shm.prefix);
    this.cudaRegions = new ChildCudaRegions((msg) => this.send(msg));
    this.exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        resolve({ code: child.exitCode, signal: child.signalCode as NodeJS.Signals | null });
      } else {
        child.once('exit', (code, signal) => resolve({ code, signal }));
      }
    });
    // `exited` never rejects (it resolves on the exit event).
    void this.exited.then((info) => this.#onExit(info));
  }

  /**
   * Spawns the child and waits for its `ready`. Rejects (and leaves no process or segment behind) when it cannot
   * start, exits first, or is silent past `startTimeoutMs`; CANCELLED when `signal` aborts.
   */
  static start(opts: ChildOptions, signal?: AbortSignal): Promise<ChildProcessHost> {
    if (signal?.aborted) return Promise.reject(new CancelledError(`${opts.kind} start was cancelled`));
    const { child, channel, stderrTail } = spawnChild(opts);
    const sock = channel.socket;
    const decoder = new FrameDecoder();
    return new Promise((resolve, reject) => {
      let done = false;
      const finish = (err: Error | undefined, host?: ChildProcessHost): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        child.off('error', onError);
        child.off('exit', onExitEarly);
        if (err === undefined) {
          resolve(host!);
          return;
        }
        channel.setOnChunk(() => {});
        child.kill('SIGKILL');
        sock.destroy();
        unlinkSegments(opts.shm.prefix);
        reject(err);
      };
      const onData = (chunk: Buffer): void => {
        let msgs: unknown[];
        try {
          msgs = decoder.push(chunk);
        } catch (e) {
          finish(new InternalError(`${opts.kind} sent a malformed first message: ${(e as Error).message}`));
          return;
        }
        const ready = msgs[0] as FromChild | undefined;
        if (ready === undefined) return;
        if (ready.op !== 'ready') {
          finish(new InternalError(`${opts.kind} sent '${ready.op}' before 'ready'`));
          return;
        }
        const host = new ChildProcessHost(child, channel, opts, ready);
        // Anything after `ready` in the same chunk is the host's to handle.
        for (const m of msgs.slice(1)) host.#dispatch(m as FromChild);
        host.#listen(decoder);
        finish(undefined, host);
      };
      const onError = (e: Error): void =>
        finish(new UnavailableError(`cannot start ${opts.kind} '${opts.command}': ${e.message}`, { cause: e }));
      const onExitEarly = (code: number | null, sig: NodeJS.Signals | null): void => {
        const tail = stderrTail.length > 0 ? `: ${stderrTail[stderrTail.length - 1]}` : '';
        finish(
          new UnavailableError(
            `${opts.kind} '${opts.command}' exited (${exitText(code, sig)}) before it was ready${tail}`,
          ),
        );
      };
      const onAbort = (): void => finish(new CancelledError(`${opts.kind} start was cancelled`));
      const timer = setTimeout(
        () =>
          finish(new UnavailableError(`${opts.kind} '${opts.command}' did not start within ${opts.startTimeoutMs} ms`)),
        opts.startTimeoutMs,
      );
      channel.setOnChunk(onData);
      sock.on('error', () => {});
      child.on('error', onError);
      child.on('exit', onExitEarly);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  #listen(decoder: FrameDecoder): void {
    this.#channel.setOnChunk((chunk: Buffer) => {
      let msgs: unknown[];
      try {
        msgs = decoder.push(chunk);
      } catch (e) {
        this.kill(`it broke the control protocol (${(e as Error).message})`);
        return;
      }
      for (const m of msgs) this.#dispatch(m as FromChild);
      if (
        this.#pendingFree.length >= FREE_FLUSH_COUNT ||
        this.#pendingFreeBytes >= this.#opts.shm.defaultByteSize / 2
      ) {
        this.send({ op: 'free', free: [] });
      }
    });
    // A socket error is followed by the process exit, which reports it.
    this.#sock.on('error', () => {});
  }

  #dispatch(msg: FromChild): void {
    if (msg.free) for (const [seg, off] of msg.free) this.arena.free(seg, off);
    const inst = (msg as { inst?: unknown }).inst;
    if (typeof inst === 'number' && msg.op !== 'log') {
      this.#instances.get(inst)?.onMessage(msg);
      return;
    }
    switch (msg.op) {
      case 'log':
        this.#log(msg);
        return;
      case 'autocompleted':
      case 'error': {
        const p = this.#oneShot;
        this.#oneShot = undefined;
        p?.resolve(msg);
        return;
      }
      default:
        if (this.services !== undefined) this.services(msg, this);
        else
          this.#opts.logger.warn(
            { childPid: this.pid, op: msg.op },
            `${this.label} sent an unexpected '${msg.op}' message`,
          );
    }
  }

  #log(msg: Extract<FromChild, { op: 'log' }>): void {
    // The logger is the instance's (or the process's): `childPid` and `at` add where the record comes from.
    const fields = { childPid: this.pid, at: msg.at || undefined };
    const text = String(msg.msg);
    const l = this.#opts.logger;
    if (msg.lvl === 'error') l.error(fields, text);
    else if (msg.lvl === 'warn') l.warn(fields, text);
    else if (msg.lvl === 'verbose') l.debug(fields, text);
    else l.info(fields, text);
  }

  /** Sends a message; block hand-backs queued with `freeLater` ride along. Ignored once the process is gone. */
  send(msg: ToChild): void {
    if (this.#gone) return;
    if (this.#pendingFree.length > 0) {
      const m = msg as { free?: FreeList };
      m.free = m.free && m.free.length > 0 ? [...m.free, ...this.#pendingFree] : this.#pendingFree;
      this.#pendingFree = [];
      this.#pendingFreeBytes = 0;
    }
    this.#sock.write(encodeFrame(msg));
  }

  /** Hands a child block back with the next message (the host copied it out). */
  freeLater(seg: number, off: number, bytes: number): void {
    this.#pendingFree.push([seg, off]);
    this.#pendingFreeBytes += bytes;
  }

  /** Registers an instance and returns its id in messages. */
  attach(instance: HostedInstance): number {
    const id = this.#nextInst++;
    if (this.#exitHow !== undefined) {
      const how = this.#exitHow;
      queueMicrotask(() => instance.onExit(how));
    }
    this.#instances.set(id, instance);
    return id;
  }

  detach(id: number): void {
    this.#instances.delete(id);
  }

  get instanceCount(): number {
    return this.#instances.size;
  }

  /** Why the process is gone, once it is. */
  get exitCause(): Error | undefined {
    return this.#exitCause;
  }

  /**
   * One request answered by `autocompleted` or `error` (messages without an instance), for short-lived
   * processes. Rejects with the error the child reports (its code) or the process's exit.
   */
  request(msg: ToChild, signal?: AbortSignal): Promise<FromChild> {
    if (this.#exitCause !== undefined) return Promise.reject(this.#exitCause);
    if (this.#oneShot !== undefined)
      return Promise.reject(new InternalError(`${this.label} is already answering a request`));
    return new Promise<FromChild>((resolve, reject) => {
      const onAbort = (): void => {
        this.#oneShot = undefined;
        reject(new CancelledError(`request to ${this.label} was cancelled`));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#oneShot = {
        resolve: (m) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(m);
        },
        reject: (e) => {
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      };
      this.send(msg);
    });
  }

  /** Kills the process now (SIGKILL); instances learn `reason` through their exit. */
  kill(reason: string): void {
    this.#killReason ??= reason;
    this.#child.kill('SIGKILL');
  }

  /** Closes the channel (the child exits on end-of-file), waits up to `graceMs`, then kills it. Idempotent. */
  close(graceMs: number): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#exitCause === undefined) {
        this.#sock.end();
        const timer = setTimeout(() => this.#child.kill('SIGKILL'), graceMs);
        timer.unref();
        await this.exited;
        clearTimeout(timer);
      }
      await this.exited;
    })();
    return this.#closing;
  }

  #onExit(info: ExitInfo): void {
    this.#gone = true;
    const how = this.#killReason ?? `exited with ${exitText(info.code, info.signal)}`;
    this.#exitHow = how;
    this.#exitCause = new InternalError(`${this.label} ${how}`);
    this.#sock.destroy();
    this.cudaRegions.dispose();
    // Nothing reads the segments any more: unmap ours, unmap theirs, and remove every file of the prefix.
    this.arena.close();
    this.peer.close();
    unlinkSegments(this.#opts.shm.prefix);
    this.#oneShot?.reject(this.#exitCause);
    this.#oneShot = undefined;
    for (const i of [...this.#instances.values()]) i.onExit(how);
  }

  /** Whether the process is still running. */
  get alive(): boolean {
    return !this.#gone;
  }

  /** Why it was killed, if it was killed on purpose (a deadline). */
  get killReason(): string | undefined {
    return this.#killReason;
  }
}

function exitText(code: number | null, signal: NodeJS.Signals | null): string {
  return signal !== null ? `signal ${signal}` : `code ${code}`;
}
