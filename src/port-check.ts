import { createServer } from 'node:net';
import { InvalidArgError } from './core/errors.js';
import type { ResolvedServeOptions } from './serve-options.js';

/**
 * Start-up's port check: each endpoint's port is bound once and released before any model loads, so a port in use
 * fails start-up at once, naming its flag, instead of after minutes of loading (Triton binds after loading too; a
 * drop-in replacement should not copy that). Port 0 and SO_REUSEPORT endpoints are not checked (any free port;
 * sharing is allowed). A port taken between this check and the real bind still fails there, with the OS's words.
 */
export async function checkPortsFree(o: ResolvedServeOptions): Promise<void> {
  const endpoints: Array<[flag: string, host: string, port: number, shared: boolean]> = [];
  if (o.http) endpoints.push(['http-port', o.http.host, o.http.port, o.reuseHttpPort]);
  if (o.grpc) endpoints.push(['grpc-port', o.grpc.host, o.grpc.port, o.reuseGrpcPort]);
  if (o.metrics) endpoints.push(['metrics-port', o.metrics.host, o.metrics.port, false]);
  for (const [flag, host, port, shared] of endpoints) {
    if (port === 0 || shared) continue;
    await new Promise<void>((resolve, reject) => {
      const probe = createServer();
      probe.once('error', (err: NodeJS.ErrnoException) => reject(portError(flag, host, port, err)));
      // `[::1]` (Triton's ipv6 form) is `::1` to listen().
      probe.listen({ host: host.replace(/^\[(.*)\]$/, '$1'), port, exclusive: true }, () =>
        probe.close(() => resolve()),
      );
    });
  }
}

/** A listen error as the operator can act on it: the flag, the address, what to do. Other errors pass unchanged. */
export function portError(flag: string, host: string, port: number, err: NodeJS.ErrnoException): Error {
  if (err.code === 'EADDRINUSE') {
    return new InvalidArgError(
      `--${flag}=${port}: ${host}:${port} is already in use (another server listens there); stop it, or give --${flag} another port (0 picks a free one)`,
    );
  }
  if (err.code === 'EACCES') {
    return new InvalidArgError(
      `--${flag}=${port}: not allowed to listen on ${host}:${port} (ports below 1024 need privileges)`,
    );
  }
  if (err.code === 'EADDRNOTAVAIL') {
    return new InvalidArgError(`--${flag}=${port}: ${host} is not an address of this machine`);
  }
  return err;
}
