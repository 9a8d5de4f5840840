import type * as grpc from '@grpc/grpc-js';
import { createServer, type AddressInfo, type ListenOptions, type Socket } from 'node:net';

/**
 * A gRPC listener with SO_REUSEPORT. grpc-js 1.14 binds its own sockets and has no reuse-port option (it ignores
 * `grpc.so_reuseport`), so Nereid listens itself and hands every accepted connection to the grpc-js server through
 * its connection injector; TLS, HTTP/2 sessions, handlers and shutdown stay grpc-js's (the injector's HTTP/2 server
 * is one of the server's own: tryShutdown and forceShutdown close it and its sessions).
 *
 * Used for Triton's `--reuse-grpc-port` and by every front-end thread, which all listen on one port.
 */
export interface ReusePortListener {
  port: number;
  /**
   * Stops accepting connections; resolves once the connections it handed over (owned by the grpc-js server) have
   * ended. Idempotent.
   */
  close(): Promise<void>;
}

export async function listenReusePort(
  server: grpc.Server,
  credentials: grpc.ServerCredentials,
  host: string,
  port: number,
): Promise<ReusePortListener> {
  const injector = server.createConnectionInjector(credentials);
  const listener = createServer((socket: Socket) => injector.injectConnection(socket));
  // `reusePort` is newer than the @types/node this project builds against (Node >= 22.12).
  const options: ListenOptions & { reusePort: boolean } = { host: host.replace(/^\[|\]$/g, ''), port, reusePort: true };
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(options, () => {
      listener.off('error', reject);
      resolve();
    });
  });
  let closed: Promise<void> | undefined;
  return {
    port: (listener.address() as AddressInfo).port,
    close: () => (closed ??= new Promise<void>((resolve) => listener.close(() => resolve()))),
  };
}
