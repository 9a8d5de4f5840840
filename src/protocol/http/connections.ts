import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** An open connection, as the drain sees it. */
interface Connection {
  /** Responses in progress on it (more than one when a client pipelines). */
  readonly responses: Set<ServerResponse>;
  /** When it last finished a response: an idle one is closed after the drain's idle grace. */
  idleSince: number;
  /** Its response was already under way when the drain began: the connection is closed once that one is done. */
  closeAfter: boolean;
  /** Its latest response, while in progress. */
  last?: ServerResponse;
}

/**
 * The HTTP server's open connections, with their responses in progress and when each last finished one, and the
 * graceful drain over them: during a drain every response says `Connection: close` and closes its connection
 * once sent, so a client in a keep-alive loop does not keep the drain going until the exit timeout (issue 22,
 * item 8); idle connections get an idle grace for one more request, as Triton serves them.
 */
export class Connections {
  readonly #open = new Map<Socket, Connection>();
  #draining = false;

  add(socket: Socket): void {
    this.#open.set(socket, { responses: new Set(), idleSince: Date.now(), closeAfter: false });
    socket.once('close', () => this.#open.delete(socket));
  }

  /** A request arrived on its connection: its response is tracked until it closes. */
  request(req: IncomingMessage, res: ServerResponse): void {
    const conn = this.#open.get(req.socket);
    conn?.responses.add(res);
    if (conn) conn.last = res;
    if (this.#draining) res.shouldKeepAlive = false;
    res.once('close', () => {
      if (!conn) return;
      conn.responses.delete(res);
      conn.idleSince = Date.now();
      if (conn.last === res) conn.last = undefined;
      if (conn.closeAfter && conn.responses.size === 0) req.socket.end();
    });
  }

  /** The connection's latest response has written something: a parse error may no longer be answered on it. */
  answering(socket: Socket): boolean {
    return this.#open.get(socket)?.last?.headersSent === true;
  }

  /** Resolves when every connection has closed: done ones at once, idle ones after `idleMs`, all by `drainMs`. */
  drain(drainMs: number, idleMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#draining = true;
      for (const conn of this.#open.values()) {
        // Responses under way: those not started yet say `Connection: close`; a started one (a stream) cannot,
        // so its connection is closed when it ends.
        for (const res of conn.responses) {
          if (res.headersSent) conn.closeAfter = true;
          else res.shouldKeepAlive = false;
        }
      }
      const deadline = Date.now() + drainMs;
      const sweep = (): void => {
        const now = Date.now();
        const over = now >= deadline;
        // Past the deadline a busy connection is closed as soon as its response is done (it is idle then).
        for (const [socket, conn] of this.#open) {
          // end(), not destroy(): a response just written may still sit in the socket's buffers, and destroying
          // it cut the end of large responses at shutdown (measured: 970,105 of 1,048,734 bytes arrived).
          // Past the deadline a client that never closes its side is cut off.
          if (conn.responses.size === 0 && (over || now - conn.idleSince >= idleMs)) {
            if (over && socket.writableEnded) socket.destroy();
            else socket.end();
          }
        }
        if (this.#open.size === 0) {
          clearInterval(timer);
          resolve();
        }
      };
      // Not unref'd: the drain is work the process must finish (an idle client socket may be unref'd on its side).
      const timer = setInterval(sweep, Math.max(10, Math.min(250, idleMs / 4)));
      sweep();
    });
  }
}

/**
 * Front-end threads share one connection count (`--http-max-connections` is the server's, not each thread's):
 * false, and the socket destroyed, when the connection would exceed it.
 */
export function admitShared(shared: { counts: Int32Array; slot: number }, socket: Socket, max: number): boolean {
  let open = Atomics.add(shared.counts, shared.slot, 1);
  for (let i = 0; i < shared.counts.length; i++) if (i !== shared.slot) open += Atomics.load(shared.counts, i);
  if (open >= max) {
    Atomics.sub(shared.counts, shared.slot, 1);
    socket.destroy();
    return false;
  }
  socket.once('close', () => Atomics.sub(shared.counts, shared.slot, 1));
  return true;
}
