import { count, grpcClient, newTally, pool, sendGrpc, sendHttp, type Tally } from './fuzz-harness.js';
import { httpCase, type HttpTemplate } from './fuzz-http-cases.js';
import type { Rng } from './mutate.js';
import type { ServerProcess } from './server-process.js';

/**
 * The response cache under mutation: requests to `cached` (identity with response_cache on, fuzz-repo.ts) drawn
 * from a few input vectors, so that hits are common, and mutated over HTTP and gRPC. The model's answer is its
 * input, so every 200 is checked against the request that was actually sent (when its input can be read back):
 * a cached answer that belongs to another request (a key that misses a field: shape, datatype, a parameter, the
 * output's form) shows as an output that is not this request's input.
 */

const VECTORS = [[1], [1, 2], [2, 1], [1, 2, 3, 4], [0.5, -0.5], [3, 3, 3], [1e-3, 7]];
const fround = (xs: number[]): number[] => xs.map(Math.fround);

/** The identity's answer to a JSON request body, or undefined where the body's input cannot be read back. */
function expectedOf(body: Uint8Array | undefined): { shape: number[]; data: number[] } | undefined {
  const text = Buffer.from(body ?? []).toString();
  // A classification answers labels, not the input.
  if (text.includes('classification')) return undefined;
  let req: { inputs?: { name?: unknown; shape?: unknown; data?: unknown }[] };
  try {
    req = JSON.parse(text) as typeof req;
  } catch {
    return undefined;
  }
  const input = Array.isArray(req?.inputs) && req.inputs.length === 1 ? req.inputs[0] : undefined;
  if (!input || !Array.isArray(input.shape) || !Array.isArray(input.data)) return undefined;
  const data = (input.data as unknown[]).flat(8);
  if (!data.every((x) => typeof x === 'number') || !input.shape.every((d) => Number.isSafeInteger(d))) return undefined;
  const values = fround(data as number[]);
  return values.every(Number.isFinite) ? { shape: input.shape as number[], data: values } : undefined;
}

/** OUTPUT0 of an HTTP answer, JSON or binary. */
function outputOf(headers: Headers, body: Buffer): { shape: number[]; data: number[] } {
  const headerLength = headers.get('inference-header-content-length');
  const json = headerLength === null ? body : body.subarray(0, Number(headerLength));
  const out = (JSON.parse(json.toString()) as { outputs: { shape: number[]; data?: number[] }[] }).outputs[0];
  if (out.data) return { shape: out.shape, data: fround(out.data) };
  const bin = body.subarray(Number(headerLength));
  return {
    shape: out.shape,
    data: Array.from(new Float32Array(bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.length))),
  };
}

function httpTemplate(rng: Rng): HttpTemplate {
  const data = rng.pick(VECTORS);
  const outputs = rng.pick([
    undefined,
    [{ name: 'OUTPUT0' }],
    [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
  ]);
  return [
    'POST',
    '/v2/models/cached/infer',
    {
      inputs: [{ name: 'INPUT0', shape: [1, data.length], datatype: 'FP32', data }],
      ...(outputs ? { outputs } : {}),
      ...(rng.chance(0.3) ? { parameters: { tag: rng.pick(['a', 'b']) } } : {}),
    },
  ];
}

/** A gRPC request's INPUT0 and the answer's OUTPUT0, where both can be read. */
function grpcMismatch(request: object, response: unknown): string | undefined {
  const req = request as {
    inputs?: { shape?: string[]; contents?: { fp32_contents?: number[] } }[];
    raw_input_contents?: Buffer[];
  };
  const res = response as { outputs: { shape: string[] }[]; raw_output_contents: Buffer[] };
  if (req.inputs?.length !== 1 || !Array.isArray(req.inputs[0].shape)) return undefined;
  const raw = req.raw_input_contents?.[0];
  const sent = raw
    ? Array.from(new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length)))
    : fround(req.inputs[0].contents?.fp32_contents ?? []);
  const bytes = res.raw_output_contents[0];
  const got = Array.from(new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)));
  const a = JSON.stringify([req.inputs[0].shape.map(Number), sent]);
  const b = JSON.stringify([res.outputs[0].shape.map(Number), got]);
  return a === b ? undefined : `gRPC cached: sent ${a}, got ${b}`;
}

function grpcTemplate(rng: Rng): object {
  const data = rng.pick(VECTORS);
  const raw = rng.chance(0.5);
  return {
    model_name: 'cached',
    inputs: [
      {
        name: 'INPUT0',
        datatype: 'FP32',
        shape: ['1', String(data.length)],
        ...(raw ? {} : { contents: { fp32_contents: data } }),
      },
    ],
    ...(raw ? { raw_input_contents: [Buffer.from(Float32Array.from(data).buffer)] } : {}),
  };
}

export async function fuzzCache(server: ServerProcess, rng: Rng, n: number): Promise<Tally> {
  const tally = newTally();
  const grpcc = grpcClient(server);
  await pool(n, async (i) => {
    if (i % 2 === 0) {
      // Unmutated now and then: well-formed requests must get their own answer, computed or cached.
      const [method, path, body] = httpTemplate(rng);
      const c =
        i % 6 === 0
          ? {
              method,
              path,
              headers: {} as Record<string, string>,
              body: Buffer.from(JSON.stringify(body)),
              what: 'valid',
            }
          : httpCase(rng, [[method, path, body]]);
      const res = await sendHttp(server.httpUrl, c, tally);
      const expected =
        c.headers['Inference-Header-Content-Length'] || c.headers['Content-Encoding'] ? undefined : expectedOf(c.body);
      if (res?.status !== 200 || expected === undefined || !c.path.startsWith('/v2/models/cached/infer')) return;
      const got = outputOf(res.headers, res.body);
      count(tally, 'checked');
      if (JSON.stringify(got) !== JSON.stringify(expected))
        tally.failures.push(`cached ${c.what}: sent ${JSON.stringify(expected)}, got ${JSON.stringify(got)}`);
      return;
    }
    const r = await sendGrpc(grpcc, rng, 'ModelInfer', grpcTemplate(rng), tally, {
      rawChance: 0.1,
      mutations: i % 4 === 1 ? 0 : undefined,
    });
    const mismatch = r.err === null && r.request ? grpcMismatch(r.request, r.response) : undefined;
    if (r.err === null && r.request && mismatch === undefined) count(tally, 'checked');
    if (mismatch) tally.failures.push(mismatch);
  });
  grpcc.client.close();
  return tally;
}
