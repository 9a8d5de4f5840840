import { closeSync } from 'node:fs';
import { Socket } from 'node:net';
import koffi from 'koffi';
import { InternalError } from '../../../core/errors.js';
import { configureKoffi } from '../../../native/koffi.js';

/**
 * The control channel's socket: a Unix socketpair made with libc's `socketpair` (koffi), one end wrapped in a
 * net.Socket here, the other handed to the child as fd 3. Why not child_process's own 'pipe' stdio: that socket
 * allocates a fresh buffer for every read, and at tens of thousands of small frames a second the garbage cost
 * showed (GC was ~20 % of the main thread's time in the transport benchmark). Here reads land in one reused
 * buffer (`onread`), which the frame decoder copies out of before the next read.
 */

const AF_UNIX = 1;
const SOCK_STREAM = 1;
const SOCK_CLOEXEC = 0o2000000;
const READ_BUFFER_BYTES = 256 * 1024;

let socketpair: ((domain: number, type: number, protocol: number, sv: number[]) => number) | undefined;

export interface ChannelPair {
  /** The host's end. `onChunk` gets each read; the bytes are valid only during the call. */
  socket: Socket;
  /** The child's end: pass it in `stdio`, then call `releaseChildEnd()` once spawned. */
  childFd: number;
  releaseChildEnd(): void;
  setOnChunk(fn: (chunk: Buffer) => void): void;
}

export function channelPair(): ChannelPair {
  if (socketpair === undefined) {
    // koffi's settings are process-wide and fixed by the first load (onnxruntime's C API needs them).
    configureKoffi();
    socketpair = koffi.load('libc.so.6').func('int socketpair(int domain, int type, int protocol, _Out_ int *sv)');
  }
  const sv = [-1, -1];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) !== 0) {
    throw new InternalError(`socketpair failed: errno ${koffi.errno()}`);
  }
  let onChunk: (chunk: Buffer) => void = () => {};
  const buffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  const socket = new Socket({
    fd: sv[0],
    readable: true,
    writable: true,
    onread: { buffer, callback: (n: number, buf: Uint8Array) => onChunk((buf as Buffer).subarray(0, n)) },
  } as ConstructorParameters<typeof Socket>[0]);
  let released = false;
  return {
    socket,
    childFd: sv[1],
    releaseChildEnd() {
      if (released) return;
      released = true;
      closeSync(sv[1]);
    },
    setOnChunk(fn) {
      onChunk = fn;
    },
  };
}
