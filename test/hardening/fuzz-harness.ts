import * as grpc from '@grpc/grpc-js';
import type { TestContext } from 'node:test';
import { loadServices } from '../../src/protocol/grpc/proto.js';
import { mutateBytes, mutateValue, type Rng } from './mutate.js';
import type { ServerProcess } from './server-process.js';

/**
 * What every hardening fuzz run shares: the seed, the hang bound, a tally of answers, a bounded pool of requests in
 * flight, and the one rule for what counts as a failure (an answer that blames the server for a client's error, a
 * hang, a crash). 501 is allowed: it is Triton's answer for a feature not offered.
 */

export const SEED = Number(process.env.NEREID_FUZZ_SEED ?? 20_26);
export const CONCURRENCY = 16;
/** No answer within this long is a hang. Generous: the suite runs on 2 loaded cores. */
export const HANG_MS = 10_000;

export interface Tally {
  sent: number;
  byStatus: Map<string, number>;
  failures: string[];
}

export const newTally = (): Tally => ({ sent: 0, byStatus: new Map(), failures: [] });
export const count = (t: Tally, key: string): void => void t.byStatus.set(key, (t.byStatus.get(key) ?? 0) + 1);

/** Runs `n` jobs, `concurrency` at a time. */
export async function pool(n: number, job: (i: number) => Promise<void>, concurrency = CONCURRENCY): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await job(next++);
    }),
  );
}

/** One line for the test's diagnostics: how many requests, which answers, the server's memory. */
export function report(t: TestContext, server: ServerProcess, name: string, tally: Tally, seed = SEED): void {
  const statuses = [...tally.byStatus]
    .sort()
    .map(([k, v]) => `${k}:${v}`)
    .join(' ');
  const mem = server.memory();
  t.diagnostic(
    `${name}: ${tally.sent} requests, seed ${seed}; answers ${statuses}; server RSS ${mem.rssMiB} MiB, peak ${mem.peakMiB} MiB`,
  );
}

/**
 * 500s Triton gives on purpose, kept for parity: loading a model the repositories do not have ("failed to load 'm',
 * failed to poll from model repository", INTERNAL; its clients look for it), an engine that fails while running on
 * the values it was given (token ids past an embedding table: onnxruntime's Gather refuses them; Triton's
 * onnxruntime backend answers INTERNAL too; it would better be a 400 and belongs to the onnxruntime adapter), and a
 * shared-memory key that cannot be opened (Triton: INTERNAL "Unable to open shared memory region").
 */
const TRITONS_OWN_500 = [
  /^failed to load '[^']*': no model folder named/,
  /^onnxruntime: Non-zero status code returned while running /,
  /^Unable to open shared memory region/,
];

export function tritonsOwn500(status: number, body: string): boolean {
  if (status !== 500) return false;
  let message: unknown;
  try {
    message = (JSON.parse(body) as { error?: unknown }).error;
  } catch {
    return false;
  }
  return typeof message === 'string' && TRITONS_OWN_500.some((re) => re.test(message));
}

/** The same answers over gRPC (INTERNAL). */
export function tritonsOwnInternal(err: grpc.ServiceError | null): boolean {
  return err?.code === grpc.status.INTERNAL && TRITONS_OWN_500.some((re) => re.test(err.details));
}

/** gRPC codes that blame the server, or show a hang. */
export const GRPC_BAD = new Set([grpc.status.INTERNAL, grpc.status.UNKNOWN, grpc.status.DEADLINE_EXCEEDED]);

export interface HttpCase {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Uint8Array;
  what: string;
}

/**
 * Sends one HTTP case and tallies its answer; a 5xx other than 501 and Triton's own, or no answer within HANG_MS,
 * is a failure. Returns the answer (undefined when the connection closed or it hung) for checks of its content.
 */
export async function sendHttp(
  base: string,
  c: HttpCase,
  tally: Tally,
): Promise<{ status: number; headers: Headers; body: Buffer } | undefined> {
  tally.sent++;
  try {
    const res = await fetch(base + c.path, {
      method: c.method,
      headers: c.headers,
      body: c.method === 'GET' || c.method === 'HEAD' ? undefined : c.body,
      signal: AbortSignal.timeout(HANG_MS),
    });
    const body = Buffer.from(await res.arrayBuffer());
    count(tally, String(res.status));
    if (res.status >= 500 && res.status !== 501 && !tritonsOwn500(res.status, body.toString())) {
      tally.failures.push(`${res.status} for ${c.what}: ${body.toString().slice(0, 200)}`);
    }
    return { status: res.status, headers: res.headers, body };
  } catch (err) {
    const e = err as Error;
    if (e.name === 'TimeoutError') tally.failures.push(`hang: ${c.what}`);
    else count(tally, 'connection-closed');
    return undefined;
  }
}

/** A client of the server's GRPCInferenceService and its method table (paths and serializers). */
export function grpcClient(server: ServerProcess): {
  client: grpc.Client;
  defs: Record<string, { path: string; requestSerialize(v: object): Buffer }>;
} {
  const { Inference } = loadServices();
  const client = new Inference(server.grpcAddress, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
  });
  const defs = Inference.service as unknown as Record<string, { path: string; requestSerialize(v: object): Buffer }>;
  return { client, defs };
}

type Unary = (
  req: object,
  md: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (e: grpc.ServiceError | null, res: unknown) => void,
) => void;

/**
 * One mutated unary gRPC call from a template: 1-3 structural mutations (drawn again when the client library
 * cannot serialize them), or now and then damaged protobuf bytes sent as they are. Tallies the answer; INTERNAL,
 * UNKNOWN (other than Triton's own) and a missed deadline are failures. Returns the error (null for OK) and the
 * decoded answer for checks of its content (undefined for raw bytes).
 */
export async function sendGrpc(
  grpcc: ReturnType<typeof grpcClient>,
  rng: Rng,
  rpc: string,
  template: object,
  tally: Tally,
  opts: { mutations?: number; rawChance?: number } = {},
): Promise<{ err: grpc.ServiceError | null; request?: object; response?: unknown }> {
  const { client, defs } = grpcc;
  let value: unknown;
  for (let attempt = 0; attempt < 4 && value === undefined; attempt++) {
    value = template;
    for (let k = opts.mutations ?? 1 + rng.int(3); k > 0; k--) value = mutateValue(rng, value);
    try {
      defs[rpc].requestSerialize(value as object);
    } catch {
      value = undefined;
    }
  }
  const rawBytes = value === undefined || rng.chance(opts.rawChance ?? 0.25);
  tally.sent++;
  const deadline = Date.now() + HANG_MS;
  const answered = (err: grpc.ServiceError | null): void => {
    const code = err === null ? grpc.status.OK : err.code;
    count(tally, grpc.status[code]);
    if (GRPC_BAD.has(code) && !tritonsOwnInternal(err))
      tally.failures.push(`${grpc.status[code]} "${err?.details}" for ${rpc}${rawBytes ? ' (bytes)' : ''}`);
  };
  if (rawBytes) {
    const bytes = mutateBytes(rng, defs[rpc].requestSerialize(template));
    const err = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.makeUnaryRequest(
        defs[rpc].path,
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from(bytes),
        new grpc.Metadata(),
        { deadline },
        (e) => resolve(e),
      ),
    );
    answered(err);
    return { err };
  }
  const request = value as object;
  return new Promise((resolve) =>
    (client as unknown as Record<string, Unary>)[rpc].call(
      client,
      request,
      new grpc.Metadata(),
      { deadline },
      (err, response) => {
        answered(err);
        resolve({ err, request, response });
      },
    ),
  );
}
