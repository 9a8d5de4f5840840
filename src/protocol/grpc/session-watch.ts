import type { EventEmitter } from 'node:events';
import type { ServerHttp2Session, ServerHttp2Stream } from 'node:http2';
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from '../../core/logger.js';

/**
 * Closes HTTP/2 connections that nghttp2 has given up on but Node keeps open.
 *
 * Why: a header field over 64 KiB (gRPC metadata of 256 KiB, say) is an HPACK error for nghttp2, which answers
 * GOAWAY(COMPRESSION_ERROR) and stops reading; Node emits no event and leaves the socket open, and a C-core client
 * (tritonclient, grpcio) then waits for its stream until its deadline — a request that hangs instead of failing.
 * The signature is visible: the session has processed a stream (`state.lastProcStreamID`) that never became a
 * 'stream' event. Checked once a second per open session; such a session is destroyed, so the client sees the
 * connection close and fails at once (UNAVAILABLE) instead of hanging.
 *
 * grpc-js does not expose its HTTP/2 servers; they are read from its private `http2Servers` map. If a grpc-js
 * release renames it, this watch is skipped with a warning (the behaviour falls back to hanging until the client's
 * deadline), and the test of it fails loudly.
 */
const CHECK_INTERVAL_MS = 1000;

interface Watched {
  lastSeen: number;
  suspect: boolean;
}

export function watchStalledSessions(server: grpc.Server, logger: Logger): () => void {
  const servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(servers instanceof Map)) {
    logger.warn('gRPC: cannot watch HTTP/2 sessions (grpc-js internals changed); oversized metadata may hang clients');
    return () => undefined;
  }
  const sessions = new Map<ServerHttp2Session, Watched>();
  const onSession = (session: ServerHttp2Session): void => {
    const w: Watched = { lastSeen: 0, suspect: false };
    sessions.set(session, w);
    session.on('stream', (stream: ServerHttp2Stream) => {
      if (stream.id !== undefined && stream.id > w.lastSeen) w.lastSeen = stream.id;
    });
    session.once('close', () => sessions.delete(session));
  };
  for (const h2 of servers.keys() as IterableIterator<EventEmitter>) h2.on('session', onSession);

  const timer = setInterval(() => {
    for (const [session, w] of sessions) {
      if (session.destroyed || session.closed) continue;
      const processed = session.state.lastProcStreamID ?? 0;
      if (processed <= w.lastSeen) {
        w.suspect = false;
        continue;
      }
      // Seen twice in a row (a second apart): not a stream whose event is still on its way.
      if (w.suspect) {
        logger.warn(
          { stream: processed },
          'gRPC: closing a connection whose request headers the HTTP/2 layer refused (metadata too large?)',
        );
        session.destroy();
        sessions.delete(session);
      } else {
        w.suspect = true;
      }
    }
  }, CHECK_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
