/**
 * Peer S6: what a Node user would write instead of Nereid — fastify + onnxruntime-node, one session per model
 * (default session options: the same thread budget as Nereid's one instance and the raw baseline), KServe v2
 * JSON only. It also answers the few routes perf_analyzer reads before it starts (/v2, health, model metadata
 * and a minimal Triton model config), so the same load generator drives every server.
 *
 *   node --import tsx bench/peers/fastify-server.ts --repository <dir> --port 8000
 *
 * <dir>/<model>/1/model.onnx is served as <model>; a leading symbolic dim is taken as the batch dim (max 8).
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import Fastify from 'fastify';
import * as ort from 'onnxruntime-node';
import { reportEventLoopDelay } from '../lag.js';

interface KserveTensor {
  name: string;
  shape: number[];
  datatype: string;
  data: number[];
}

const KSERVE_TO_ORT: Record<string, 'int32' | 'int64' | 'float32'> = {
  INT32: 'int32',
  INT64: 'int64',
  FP32: 'float32',
};
const ORT_TO_KSERVE: Record<string, string> = { int32: 'INT32', int64: 'INT64', float32: 'FP32' };
const ORT_TO_TRITON: Record<string, string> = { int32: 'TYPE_INT32', int64: 'TYPE_INT64', float32: 'TYPE_FP32' };

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

function describe(
  values: readonly ort.InferenceSession.ValueMetadata[],
): { name: string; type: string; dims: number[] }[] {
  return values.map((v) => {
    if (!v.isTensor) throw new Error(`${v.name}: only tensors are served`);
    return { name: v.name, type: v.type, dims: v.shape.map((d) => (typeof d === 'number' ? d : -1)) };
  });
}

const repository = arg('--repository', 'examples/model_repository');
const models = new Map<string, ort.InferenceSession>();
for (const name of readdirSync(repository)) {
  models.set(name, await ort.InferenceSession.create(join(repository, name, '1', 'model.onnx')));
}

const app = Fastify({ bodyLimit: 64 * 1024 * 1024 });
const ok = async (): Promise<string> => '';
app.get('/v2/health/ready', ok);
app.get('/v2/health/live', ok);
app.get('/v2', async () => ({ name: 'fastify-onnxruntime', version: '1', extensions: [] }));

app.get<{ Params: { model: string } }>('/v2/models/:model', async (req, reply) => {
  const session = models.get(req.params.model);
  if (!session) return reply.code(404).send({ error: `unknown model '${req.params.model}'` });
  const meta = (v: readonly ort.InferenceSession.ValueMetadata[]): object[] =>
    describe(v).map((t) => ({ name: t.name, datatype: ORT_TO_KSERVE[t.type], shape: t.dims }));
  return {
    name: req.params.model,
    versions: ['1'],
    platform: 'onnxruntime_onnx',
    inputs: meta(session.inputMetadata),
    outputs: meta(session.outputMetadata),
  };
});

app.get<{ Params: { model: string } }>('/v2/models/:model/config', async (req, reply) => {
  const session = models.get(req.params.model);
  if (!session) return reply.code(404).send({ error: `unknown model '${req.params.model}'` });
  const conf = (v: readonly ort.InferenceSession.ValueMetadata[]): object[] =>
    describe(v).map((t) => ({ name: t.name, data_type: ORT_TO_TRITON[t.type], dims: t.dims.slice(1) }));
  return {
    name: req.params.model,
    platform: 'onnxruntime_onnx',
    max_batch_size: 8,
    input: conf(session.inputMetadata),
    output: conf(session.outputMetadata),
  };
});

app.post<{ Params: { model: string }; Body: { id?: string; inputs: KserveTensor[] } }>(
  '/v2/models/:model/infer',
  async (req, reply) => {
    const session = models.get(req.params.model);
    if (!session) return reply.code(404).send({ error: `unknown model '${req.params.model}'` });
    const feeds: Record<string, ort.Tensor> = {};
    for (const input of req.body.inputs) {
      const type = KSERVE_TO_ORT[input.datatype];
      if (!type) return reply.code(400).send({ error: `unsupported datatype ${input.datatype}` });
      const data = input.data.flat(Infinity) as number[];
      const values =
        type === 'int32'
          ? Int32Array.from(data)
          : type === 'float32'
            ? Float32Array.from(data)
            : BigInt64Array.from(data, BigInt);
      feeds[input.name] = new ort.Tensor(type, values, input.shape);
    }
    const results = await session.run(feeds);
    return {
      model_name: req.params.model,
      model_version: '1',
      id: req.body.id,
      outputs: Object.entries(results).map(([name, t]) => ({
        name,
        datatype: ORT_TO_KSERVE[t.type],
        shape: t.dims,
        data: t.type === 'int64' ? Array.from(t.data as BigInt64Array, Number) : Array.from(t.data as Int32Array),
      })),
    };
  },
);

reportEventLoopDelay();
await app.listen({ host: '127.0.0.1', port: Number(arg('--port', '8000')) });
