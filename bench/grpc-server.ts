/**
 * Child process of bench/grpc.ts: serves the example repository over HTTP and gRPC in one process, as
 * `nereid serve` will once the CLI starts the gRPC endpoint, and prints `READY <http> <grpc>`.
 * Also handy by hand: `GRPC_PORT=8001 node --import tsx bench/grpc-server.ts`.
 */
import { serve } from '../src/serve.js';
import { startGrpcServer } from '../src/protocol/grpc/index.js';
import { EXAMPLES } from '../test/helpers/server.js';

async function main(): Promise<void> {
  const running = await serve({
    repositories: [EXAMPLES],
    httpPort: Number(process.env.HTTP_PORT ?? 0),
    httpAddress: '127.0.0.1',
    metricsPort: Number(process.env.METRICS_PORT ?? 0),
    allowGrpc: false,
  });
  const grpc = await startGrpcServer(running.server, { host: '127.0.0.1', port: Number(process.env.GRPC_PORT ?? 0) });
  process.stdout.write(`READY ${running.httpPort ?? 0} ${grpc.port}\n`);
  const stop = (): void => {
    // A signal handler cannot await; a failed close surfaces as an unhandled rejection, which ends the process too.
    void grpc
      .close(1000)
      .then(() => running.close())
      .then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

await main();
