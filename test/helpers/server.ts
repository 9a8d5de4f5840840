import { fileURLToPath } from 'node:url';
import { serve, type RunningNereid, type ServeOptions } from '../../src/serve.js';

/** The bundled example repository. */
export const EXAMPLES = fileURLToPath(new URL('../../examples/model_repository', import.meta.url));

export interface TestServer extends RunningNereid {
  url: string;
}

/**
 * Front-end threads the suites run with: `NEREID_TEST_FRONTEND_THREADS` (default 1, the main thread serving the
 * protocols itself). `npm test` runs the protocol suites a second time with 2 (package.json `test:threads`).
 */
export const TEST_FRONTEND_THREADS = Number(process.env.NEREID_TEST_FRONTEND_THREADS ?? 1);

/** Starts the real server (real onnxruntime, real sockets) on 127.0.0.1, port 0. */
export async function startNereid(opts: Partial<ServeOptions> & { repositories?: string[] } = {}): Promise<TestServer> {
  const running = await serve({
    repositories: [EXAMPLES],
    metricsPort: 0,
    grpcPort: 0,
    grpcAddress: '127.0.0.1',
    httpThreadCount: TEST_FRONTEND_THREADS,
    // Tests close servers while their HTTP clients still pool idle connections: close those at once instead of
    // serving them for the shutdown's keep-alive grace (tested on its own in limits-http-connections.test.ts).
    httpDrainIdleMs: 0,
    ...opts,
    httpPort: 0,
    httpAddress: '127.0.0.1',
  });
  return { ...running, url: running.httpUrl as string };
}
