import type { Socket } from 'node:net';
import { InvalidArgError } from '../../core/errors.js';
import { httpStatusOf } from '../kserve/status.js';

/**
 * Answers for requests Node's HTTP parser refused before any handler saw them (the server's `clientError` event).
 *
 * One of them gets a body that says why: a request with both `Transfer-Encoding: chunked` and `Content-Length`
 * (what Python's `requests` sends when a caller sets Content-Length and frames the chunks itself). RFC 9112 §6.1
 * lets a server either reject it or read it by Transfer-Encoding alone, and requires closing the connection after
 * the response in both cases. Triton reads it. Node 24's parser cannot: llhttp has a flag for just this
 * (`kLenientChunkedLength`), but Node offers only all of llhttp's lenient flags at once (`insecureHTTPParser`,
 * `httpValidation: 'insecure'`) or none, per server, and the parser of a connection cannot be changed through a
 * public API. Turning every lenient flag on for every request would let other malformed requests through (request
 * smuggling), so Nereid refuses this one, says so, and closes the connection (README, deviations).
 *
 * Every other parse error gets Node's own answer, as before this listener existed (Node writes it only when it has
 * no listener of its own).
 */

/** Node's error for Transfer-Encoding together with Content-Length (llhttp's reason names both). */
const BOTH_FRAMINGS = /Content-Length/i;

export const BOTH_FRAMINGS_MESSAGE =
  'request has both Transfer-Encoding and Content-Length: Nereid refuses such a request (RFC 9112 §6.1 allows ' +
  'that) because its HTTP parser cannot read it by Transfer-Encoding alone without relaxing its checks for every ' +
  'request; send either Transfer-Encoding: chunked or Content-Length, not both';

/** Node's canned answers (node:_http_server), by error code. */
const NODE_ANSWERS: Readonly<Record<string, string>> = Object.freeze({
  HPE_HEADER_OVERFLOW: 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n\r\n',
  ERR_HTTP_REQUEST_TIMEOUT: 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n',
});
const NODE_BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n';

function bothFramingsAnswer(): string {
  const err = new InvalidArgError(BOTH_FRAMINGS_MESSAGE);
  const body = JSON.stringify({ error: err.message });
  return (
    `HTTP/1.1 ${httpStatusOf(err.code)} Bad Request\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

/**
 * The server's `clientError` listener. `headSent` says whether the connection's latest response has written its head
 * (an answer now would corrupt it): then the socket is only closed, as Node does.
 */
export function answerClientError(
  err: Error & { code?: string; reason?: string },
  socket: Socket,
  headSent: boolean,
): void {
  if (socket.writable && !headSent) {
    const both = err.code === 'HPE_INVALID_TRANSFER_ENCODING' && BOTH_FRAMINGS.test(err.reason ?? err.message);
    // Closed once the answer is flushed: destroying at once could cut it (the peer then sees a reset).
    socket.end(both ? bothFramingsAnswer() : (NODE_ANSWERS[err.code ?? ''] ?? NODE_BAD_REQUEST), () =>
      socket.destroy(),
    );
    return;
  }
  socket.destroy();
}
