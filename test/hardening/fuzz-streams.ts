import * as grpc from '@grpc/grpc-js';
import { count, grpcClient, HANG_MS, newTally, pool, sendHttp, type Tally } from './fuzz-harness.js';
import { httpCase, type HttpTemplate } from './fuzz-http-cases.js';
import { mutateValue, type Rng } from './mutate.js';
import type { ServerProcess } from './server-process.js';

/**
 * Decoupled streams under mutation: gRPC ModelStreamInfer and HTTP generate/generate_stream against `fanout`
 * (fuzz-repo.ts). Mutated requests share each stream with well-formed ones, whose answers are checked: every
 * element of IN comes back in order as OUT with its IDX, then exactly one final flag, whatever the requests around
 * them did. Each stream must end once the client half-closes (a stream that does not is a hang).
 */

interface StreamResponse {
  error_message: string;
  infer_response?: {
    id: string;
    outputs: { name: string }[];
    raw_output_contents: Buffer[];
    parameters: Record<string, { bool_param?: boolean }>;
  };
}

const valuesOf = (n: number, rng: Rng): number[] => Array.from({ length: n }, () => rng.int(1000));

function streamTemplate(values: number[], id: string, final = false): object {
  return {
    model_name: 'fanout',
    id,
    ...(final ? { parameters: { triton_enable_empty_final_response: { bool_param: true } } } : {}),
    inputs: [{ name: 'IN', datatype: 'INT32', shape: [String(values.length)], contents: { int_contents: values } }],
  };
}

/** One stream: `mutated` mutated requests and a few well-formed ones, interleaved; the well-formed are checked. */
async function oneStream(server: ServerProcess, rng: Rng, tally: Tally, index: number, mutated: number) {
  const { client, defs } = grpcClient(server);
  const call = (
    client as unknown as { ModelStreamInfer(): grpc.ClientDuplexStream<object, StreamResponse> }
  ).ModelStreamInfer();
  const valid = new Map<string, { values: number[]; out: number[]; idx: number[]; finals: number }>();
  const ended = new Promise<void>((resolve) => {
    call.on('data', (r: StreamResponse) => {
      if (/internal error \(id/.test(r.error_message)) tally.failures.push(`stream: ${r.error_message}`);
      const resp = r.infer_response;
      const v = resp && valid.get(resp.id);
      if (!v) return;
      if (r.error_message !== '') tally.failures.push(`stream ${resp.id}: ${r.error_message}`);
      if (resp.parameters.triton_final_response?.bool_param === true) v.finals++;
      resp.outputs.forEach((o, i) => {
        const bytes = resp.raw_output_contents[i];
        const value = bytes.length === 4 ? bytes.readInt32LE(0) : NaN;
        (o.name === 'OUT' ? v.out : v.idx).push(o.name === 'IDX' && bytes.length === 4 ? bytes.readUInt32LE(0) : value);
      });
    });
    call.on('end', resolve);
    call.on('error', (err: grpc.ServiceError) => {
      if (err.code === grpc.status.INTERNAL || err.code === grpc.status.UNKNOWN)
        tally.failures.push(`stream ${index} failed: ${grpc.status[err.code]} ${err.details}`);
      resolve();
    });
  });
  for (let i = 0; i < mutated; i++) {
    if (i % 8 === 0) {
      const id = `v-${index}-${i}`;
      const values = valuesOf(1 + rng.int(6), rng);
      valid.set(id, { values, out: [], idx: [], finals: 0 });
      call.write(streamTemplate(values, id, true));
    }
    let v = mutateValue(rng, streamTemplate(valuesOf(rng.int(4), rng), 'f', rng.chance(0.5))) as object;
    try {
      defs.ModelStreamInfer.requestSerialize(v);
    } catch {
      v = streamTemplate([-1], 'f'); // grpc-js would fail the whole stream client-side: an error response instead
    }
    call.write(v);
    tally.sent++;
  }
  call.end();
  let hang: NodeJS.Timeout | undefined;
  await Promise.race([
    ended,
    new Promise<void>((resolve) => {
      hang = setTimeout(() => {
        tally.failures.push(`stream ${index} did not end within ${(HANG_MS * 3) / 1000} s of its half-close`);
        resolve();
      }, HANG_MS * 3);
    }),
  ]).finally(() => clearTimeout(hang));
  client.close();
  for (const [id, v] of valid) {
    const idx = v.values.map((_, i) => i);
    count(tally, 'checked');
    if (JSON.stringify([v.out, v.idx, v.finals]) !== JSON.stringify([v.values, idx, 1]))
      tally.failures.push(`stream ${id}: sent ${v.values}, got OUT ${v.out} IDX ${v.idx}, ${v.finals} final flags`);
  }
}

/** The OUT values of an SSE body (`data: {...}` events). */
function sseValues(body: string): unknown[] {
  return body
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => (JSON.parse(e.slice(6)) as { OUT?: unknown; error?: string }).OUT ?? 'error');
}

export async function fuzzStreams(server: ServerProcess, rng: Rng, n: number): Promise<Tally> {
  const tally = newTally();
  const streams = 5;
  const perStream = Math.ceil((n * 0.6) / streams);
  const streaming = Promise.all(Array.from({ length: streams }, (_, s) => oneStream(server, rng, tally, s, perStream)));
  const templates: HttpTemplate[] = [
    ['POST', '/v2/models/fanout/generate_stream', { IN: [1, 2, 3] }],
    ['POST', '/v2/models/fanout/generate_stream', { IN: [4], parameters: { x: 1 } }],
    ['POST', '/v2/models/fanout/generate', { IN: [5] }],
    ['POST', '/v2/models/fanout/infer', { inputs: [{ name: 'IN', shape: [2], datatype: 'INT32', data: [1, 2] }] }],
  ];
  const httpCount = n - perStream * streams;
  await pool(
    httpCount,
    async (i) => {
      if (i % 5 === 0) {
        // A well-formed stream among the mutated ones: its events are its elements, in order.
        const values = valuesOf(1 + rng.int(5), rng);
        const body = Buffer.from(JSON.stringify({ IN: values }));
        const path = '/v2/models/fanout/generate_stream';
        const res = await sendHttp(server.httpUrl, { method: 'POST', path, headers: {}, body, what: 'valid' }, tally);
        const got = res?.status === 200 ? sseValues(res.body.toString()) : res?.status;
        count(tally, 'checked');
        if (JSON.stringify(got) !== JSON.stringify(values))
          tally.failures.push(`generate_stream of ${values}: got ${JSON.stringify(got)}`);
      }
      await sendHttp(server.httpUrl, httpCase(rng, templates), tally);
    },
    4,
  );
  await streaming;
  return tally;
}
