import * as grpc from '@grpc/grpc-js';
import { serve, type RunningNereid } from '../../src/serve.js';
import {
  loadServices,
  startGrpcServer,
  type GrpcServerOptions,
  type RunningGrpcServer,
} from '../../src/protocol/grpc/index.js';
import { startFrontEnds } from '../../src/frontend/pool.js';
import { EXAMPLES, TEST_FRONTEND_THREADS } from './server.js';

/** A real Nereid (HTTP on port 0) with the gRPC endpoint on 127.0.0.1, port 0, and a client for it. */
export interface GrpcNereid {
  running: RunningNereid;
  grpc: RunningGrpcServer;
  address: string;
  client: grpc.Client;
  /** Calls a unary rpc; rejects with the grpc-js ServiceError. */
  unary<T = Record<string, unknown>>(
    method: string,
    request: object,
    opts?: grpc.CallOptions,
    metadata?: grpc.Metadata,
  ): Promise<T>;
  close(): Promise<void>;
}

type UnaryFn = (
  req: object,
  md: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res: unknown) => void,
) => grpc.ClientUnaryCall;

/** A client of our GRPCInferenceService (messages decoded with the same loader options as the server). */
export function inferenceClient(
  address: string,
  creds = grpc.credentials.createInsecure(),
  options: grpc.ChannelOptions = {},
): grpc.Client {
  const { Inference } = loadServices();
  return new Inference(address, creds, {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
    ...options,
  });
}

/** Promisified unary call on any client built from our service. */
export function callUnary<T>(
  client: grpc.Client,
  method: string,
  request: object,
  opts: grpc.CallOptions = {},
  metadata = new grpc.Metadata(),
): Promise<T> {
  const fn = (client as unknown as Record<string, UnaryFn>)[method];
  if (typeof fn !== 'function') throw new Error(`no rpc ${method}`);
  return new Promise((resolve, reject) => {
    fn.call(client, request, metadata, opts, (err, res) => (err ? reject(err) : resolve(res as T)));
  });
}

/**
 * Starts the gRPC endpoint of `running`'s server with these options: on the main thread, or on front-end threads
 * when the suites run with several (TEST_FRONTEND_THREADS).
 */
export async function startTestGrpcServer(
  running: RunningNereid,
  opts: Partial<GrpcServerOptions> = {},
): Promise<RunningGrpcServer> {
  const settings = { host: '127.0.0.1', ...opts, port: 0 };
  if (TEST_FRONTEND_THREADS <= 1) return startGrpcServer(running.server, settings);
  const { logger: _logger, ...grpc } = settings;
  const frontEnds = await startFrontEnds(running.server, { threads: TEST_FRONTEND_THREADS, grpc });
  return { port: frontEnds.grpcPort as number, close: (graceMs) => frontEnds.close(graceMs) };
}

export async function startGrpcNereid(opts: Partial<GrpcServerOptions> = {}): Promise<GrpcNereid> {
  const running = await serve({
    repositories: [EXAMPLES],
    httpPort: 0,
    httpAddress: '127.0.0.1',
    metricsPort: 0,
    allowGrpc: false,
    httpThreadCount: TEST_FRONTEND_THREADS,
  });
  let server: RunningGrpcServer;
  try {
    server = await startTestGrpcServer(running, opts);
  } catch (err) {
    await running.close();
    throw err;
  }
  const address = `127.0.0.1:${server.port}`;
  const client = inferenceClient(address);
  return {
    running,
    grpc: server,
    address,
    client,
    unary: (method, request, callOpts, metadata) => callUnary(client, method, request, callOpts, metadata),
    async close() {
      client.close();
      await server.close(2000);
      await running.close();
    },
  };
}

/** Little-endian bytes of an Int32Array (what raw_input_contents carries). */
export const int32Bytes = (values: readonly number[]): Buffer => Buffer.from(new Int32Array(values).buffer);
export const fp32Bytes = (values: readonly number[]): Buffer => Buffer.from(new Float32Array(values).buffer);

/** Int32 values of a raw_output_contents entry. */
export function int32Of(buf: Uint8Array): number[] {
  const copy = Buffer.from(buf);
  return [...new Int32Array(copy.buffer, copy.byteOffset, copy.byteLength / 4)];
}

export function fp32Of(buf: Uint8Array): number[] {
  const copy = Buffer.from(buf);
  return [...new Float32Array(copy.buffer, copy.byteOffset, copy.byteLength / 4)];
}

/** The `simple` request: INPUT0 = 0..15, INPUT1 = ones, batch 1, as raw contents. */
export function simpleRaw(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model_name: 'simple',
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
    ],
    raw_input_contents: [int32Bytes([...Array(16).keys()]), int32Bytes(Array(16).fill(1))],
    ...extra,
  };
}
