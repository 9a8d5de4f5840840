import type * as grpc from '@grpc/grpc-js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';
import type { ServerProcess } from './server-process.js';

/**
 * One round of the soak's mixed traffic against the fuzz repository (fuzz-repo.ts) and the example `simple`: HTTP
 * and gRPC infers and errors, a decoupled gRPC stream and SSE streams (one of each abandoned midway), sequences
 * (and one abandoned for the idle timeout to reap), response-cache hits and misses, and shared-memory
 * register/infer/unregister. Every kind runs at once. Returns what went wrong (wrong answers, 5xx); the soak
 * reports it beside the memory.
 */

const range16 = Array.from({ length: 16 }, (_, i) => i);
const int32s = (xs: number[]): Buffer => Buffer.from(Int32Array.from(xs).buffer);

export interface SoakContext {
  server: ServerProcess;
  client: grpc.Client;
  /** A /dev/shm key with INPUT0 (0..15) at 0 and INPUT1 (1s) at 64. */
  shmKey: string;
}

export function soakContext(server: ServerProcess, shmKey: string): SoakContext {
  return { server, client: inferenceClient(server.grpcAddress), shmKey };
}

const simpleJson = (extra: object = {}): string =>
  JSON.stringify({
    inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [1, 16], datatype: 'INT32', data: range16 })),
    ...extra,
  });

const simpleGrpc = {
  model_name: 'simple',
  inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: ['1', '16'] })),
  raw_input_contents: [int32s(range16), int32s(range16)],
};

async function post(ctx: SoakContext, path: string, body: string, problems: string[], want = 200): Promise<Buffer> {
  const res = await fetch(ctx.server.httpUrl + path, { method: 'POST', body });
  const out = Buffer.from(await res.arrayBuffer());
  if (res.status !== want) problems.push(`${path}: ${res.status} (wanted ${want}) ${out.toString().slice(0, 120)}`);
  return out;
}

async function grpcCall(ctx: SoakContext, rpc: string, req: object, problems: string[], want: number | number[] = 0) {
  const wanted = ([] as number[]).concat(want);
  try {
    const r = await callUnary<Record<string, unknown>>(ctx.client, rpc, req, { deadline: Date.now() + 30_000 });
    if (!wanted.includes(0)) problems.push(`${rpc}: OK (wanted code ${wanted})`);
    return r;
  } catch (err) {
    const code = (err as grpc.ServiceError).code;
    if (!wanted.includes(code)) problems.push(`${rpc}: ${(err as Error).message} (wanted code ${wanted})`);
    return undefined;
  }
}

async function infers(ctx: SoakContext, n: number, problems: string[]): Promise<void> {
  for (let i = 0; i < n; i++) {
    const binary = i % 4 === 0 ? { outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }] } : {};
    await post(ctx, '/v2/models/simple/infer', simpleJson(binary), problems);
    await grpcCall(ctx, 'ModelInfer', simpleGrpc, problems);
    if (i % 4 === 1) {
      await post(ctx, '/v2/models/simple/infer', '{"inputs": [', problems, 400);
      await post(ctx, '/v2/models/nope/infer', simpleJson(), problems, 404);
      await grpcCall(ctx, 'ModelInfer', { ...simpleGrpc, raw_input_contents: [] }, problems, 3);
    }
  }
}

/** A gRPC stream of `n` fanout requests (every response counted), and one the client cancels midway. */
async function streams(ctx: SoakContext, n: number, problems: string[]): Promise<void> {
  const open = () =>
    (ctx.client as unknown as { ModelStreamInfer(): grpc.ClientDuplexStream<object, unknown> }).ModelStreamInfer();
  const req = (k: number) => ({
    model_name: 'fanout',
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [String(k)], contents: { int_contents: range16.slice(0, k) } }],
  });
  const call = open();
  let got = 0;
  const done = new Promise<void>((resolve) => {
    call.on('data', () => got++);
    call.on('end', resolve);
    call.on('error', (e: Error) => (problems.push(`stream: ${e.message}`), resolve()));
  });
  let want = 0;
  for (let i = 0; i < n; i++) {
    call.write(req(1 + (i % 8)));
    want += 1 + (i % 8);
  }
  call.end();
  await done;
  if (got !== want) problems.push(`stream: ${got} responses, wanted ${want}`);
  const cancelled = open();
  cancelled.on('error', () => undefined);
  cancelled.write(req(16));
  await new Promise<void>((resolve) => cancelled.once('data', () => resolve()));
  cancelled.cancel();
  for (let i = 0; i < n / 4; i++) {
    const body = await post(ctx, '/v2/models/fanout/generate_stream', JSON.stringify({ IN: [1, 2, 3, 4] }), problems);
    if ((body.toString().match(/^data: /gm) ?? []).length !== 4) problems.push(`generate_stream: ${body.toString()}`);
  }
  // An SSE client that goes away after its first event.
  const abort = new AbortController();
  const res = await fetch(`${ctx.server.httpUrl}/v2/models/fanout/generate_stream`, {
    method: 'POST',
    body: JSON.stringify({ IN: range16 }),
    signal: abort.signal,
  });
  await res.body?.getReader().read();
  abort.abort();
}

/** `n` sequences of 5 steps on acc (HTTP and gRPC by turns), each sum checked, and one START left abandoned. */
async function sequences(ctx: SoakContext, round: number, n: number, problems: string[]): Promise<void> {
  const step = async (id: number, value: number, start: boolean, end: boolean, overGrpc: boolean) => {
    if (overGrpc) {
      const r = await grpcCall(
        ctx,
        'ModelInfer',
        {
          model_name: 'acc',
          inputs: [{ name: 'INPUT', datatype: 'INT32', shape: ['1', '1'], contents: { int_contents: [value] } }],
          parameters: {
            sequence_id: { int64_param: String(id) },
            sequence_start: { bool_param: start },
            sequence_end: { bool_param: end },
          },
        },
        problems,
      );
      return r ? (r.raw_output_contents as Buffer[])[0].readInt32LE(0) : undefined;
    }
    const body = JSON.stringify({
      inputs: [{ name: 'INPUT', shape: [1, 1], datatype: 'INT32', data: [value] }],
      parameters: { sequence_id: id, sequence_start: start, sequence_end: end },
    });
    const out = await post(ctx, '/v2/models/acc/infer', body, problems);
    return (JSON.parse(out.toString()) as { outputs?: { data: number[] }[] }).outputs?.[0].data[0];
  };
  await Promise.all(
    Array.from({ length: n }, async (_, k) => {
      const id = 1_000_000 + round * 100 + k;
      let sum = 0;
      for (let s = 0; s < 5; s++) {
        sum += s + k;
        const out = await step(id, s + k, s === 0, s === 4, k % 2 === 1);
        if (out !== sum) problems.push(`sequence ${id} step ${s}: ${out}, wanted ${sum}`);
      }
    }),
  );
  await step(2_000_000 + round, 1, true, false, false);
}

async function cache(ctx: SoakContext, round: number, n: number, problems: string[]): Promise<void> {
  for (let i = 0; i < n; i++) {
    // Mostly repeats (hits); every fifth unique to this round (misses that fill and evict).
    const data = i % 5 === 0 ? [round, i] : [i % 4, 1];
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, 2], datatype: 'FP32', data }] });
    const out = await post(ctx, '/v2/models/cached/infer', body, problems);
    const got = (JSON.parse(out.toString()) as { outputs?: { data: number[] }[] }).outputs?.[0].data;
    if (JSON.stringify(got) !== JSON.stringify(data)) problems.push(`cache: sent ${data}, got ${got}`);
  }
}

async function shm(ctx: SoakContext, round: number, n: number, problems: string[]): Promise<void> {
  const name = `soak_${round}`;
  const R = '/v2/systemsharedmemory/region';
  await post(ctx, `${R}/${name}/register`, JSON.stringify({ key: ctx.shmKey, offset: 0, byte_size: 128 }), problems);
  const region = (offset: number) => ({
    parameters: { shared_memory_region: name, shared_memory_offset: offset, shared_memory_byte_size: 64 },
  });
  const body = JSON.stringify({
    inputs: [
      { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', ...region(0) },
      { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', ...region(64) },
    ],
  });
  for (let i = 0; i < n; i++) await post(ctx, '/v2/models/simple/infer', body, problems);
  await post(ctx, `${R}/${name}/unregister`, '', problems);
  await grpcCall(ctx, 'SystemSharedMemoryRegister', { name, key: ctx.shmKey, offset: '0', byte_size: '128' }, problems);
  await grpcCall(ctx, 'SystemSharedMemoryUnregister', { name }, problems);
  // A key that cannot be opened: INVALID_ARGUMENT today, INTERNAL as Triton (issue 22 item 16).
  const missing = { name, key: '/nereid-soak-missing', byte_size: '8' };
  await grpcCall(ctx, 'SystemSharedMemoryRegister', missing, problems, [3, 13]);
}

/** One round; `scale` multiplies the request counts (1: about 400 requests). */
export async function soakRound(ctx: SoakContext, round: number, scale = 1): Promise<string[]> {
  const problems: string[] = [];
  const n = (k: number): number => Math.max(1, Math.round(k * scale));
  await Promise.all([
    infers(ctx, n(40), problems),
    streams(ctx, n(20), problems),
    sequences(ctx, round, n(4), problems),
    cache(ctx, round, n(30), problems),
    shm(ctx, round, n(10), problems),
  ]);
  return problems;
}
