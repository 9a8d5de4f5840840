import { parentPort, workerData } from 'node:worker_threads';
import { InferenceSession, Tensor as OrtTensor } from 'onnxruntime-node';
import { dataTypeFromOrt, DATATYPES } from '../../core/datatypes.js';
import { NereidError, type ErrorCode } from '../../core/errors.js';
import type { ModelSignature, TensorSignature } from '../backend.js';
import { ownsBuffer, stringsToWire, wireToStrings, type WireTensor } from './convert.js';
import type { FromWorker, ToWorker, WireError, WorkerInit } from './protocol.js';

/**
 * A session worker: one InferenceSession on its own thread. onnxruntime-node's run() and session creation
 * are synchronous native calls that block the calling JS thread (tens of ms), so they never happen on the
 * main thread. Runs are serialized by the worker's event loop: an instance executes one batch at a time,
 * as Triton's instances do; ORT's own intra/inter-op pools parallelize within a run.
 */

const port = parentPort;
if (port === null) throw new Error('onnxruntime worker.ts must run in a worker thread');
const init = workerData as WorkerInit;

function post(msg: FromWorker, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(msg, transfer);
}

/** ORT reports bad inputs (shape, type, names) as INVALID_ARGUMENT or TypeError/RangeError from its JS checks. */
function toWireError(err: unknown, fallback: ErrorCode = 'INTERNAL'): WireError {
  if (err instanceof NereidError) return { code: err.code, message: err.message };
  const message = err instanceof Error ? err.message : String(err);
  const invalid =
    err instanceof TypeError ||
    err instanceof RangeError ||
    /INVALID_ARGUMENT|invalid dimensions|invalid input|invalid output|missing|Unexpected input data type/i.test(
      message,
    );
  return { code: invalid ? 'INVALID_ARG' : fallback, message: `onnxruntime: ${message}` };
}

function signatureOf(session: InferenceSession): ModelSignature {
  const conv = (metas: readonly InferenceSession.ValueMetadata[], kind: string): TensorSignature[] =>
    metas.map((m) => {
      if (!m.isTensor) throw new NereidError('UNSUPPORTED', `${kind} '${m.name}' is not a tensor (sequence or map)`);
      const datatype = dataTypeFromOrt(m.type);
      if (datatype === undefined) {
        throw new NereidError(
          'UNSUPPORTED',
          `${kind} '${m.name}' has onnxruntime type '${m.type}', which Nereid does not support`,
        );
      }
      // A symbolic dim is a string (its dim_param, possibly empty); a fixed dim a non-negative number.
      return { name: m.name, datatype, dims: m.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)) };
    });
  return { inputs: conv(session.inputMetadata, 'input'), outputs: conv(session.outputMetadata, 'output') };
}

function toOrt(w: WireTensor): OrtTensor {
  const ortType = DATATYPES[w.datatype].ortName;
  if (ortType === undefined) {
    throw new NereidError(
      'INVALID_ARG',
      `input '${w.name}': datatype ${w.datatype} has no onnxruntime-node tensor type`,
    );
  }
  if (w.datatype === 'BYTES') return new OrtTensor('string', wireToStrings(w), w.shape);
  // BOOL is a Uint8Array, FP16 a Uint16Array of raw bits: both exactly what ORT's 'bool'/'float16' accept.
  return new OrtTensor(ortType as 'float32', w.data as Float32Array, w.shape);
}

function fromOrt(name: string, t: OrtTensor, transfer: ArrayBuffer[]): WireTensor {
  const datatype = dataTypeFromOrt(t.type);
  if (datatype === undefined)
    throw new NereidError('INTERNAL', `output '${name}': unsupported onnxruntime type '${t.type}'`);
  const shape = t.dims.slice();
  if (datatype === 'BYTES') {
    const data = stringsToWire(t.data as string[]);
    transfer.push(data.buffer as ArrayBuffer);
    return { name, datatype, shape, data };
  }
  // onnxruntime-node 1.30 returns outputs in fresh, transferable ArrayBuffers (measured: offset 0, whole
  // buffer). Copy only if a future version hands out a view into something larger.
  let data = t.data as WireTensor['data'];
  if (!ownsBuffer(data)) data = data.slice();
  transfer.push(data.buffer as ArrayBuffer);
  return { name, datatype, shape, data };
}

async function serve(session: InferenceSession): Promise<void> {
  const runOptions = init.run as InferenceSession.RunOptions;
  port!.on('message', (msg: ToWorker) => {
    if (msg.type === 'close') {
      port!.removeAllListeners('message');
      // A release that fails changes nothing for the host (the worker ends once the port closes): close either way.
      const closePort = (): void => port!.close();
      session.release().then(closePort, closePort);
      return;
    }
    if (msg.type === '__crash') process.exit(70);
    // Requests overlap on purpose (onnxruntime queues them); execute() answers its own failures to the host.
    void execute(session, runOptions, msg);
  });
}

async function execute(
  session: InferenceSession,
  runOptions: InferenceSession.RunOptions,
  msg: Extract<ToWorker, { type: 'run' }>,
): Promise<void> {
  try {
    const t0 = process.hrtime.bigint();
    const feeds: Record<string, OrtTensor> = {};
    for (const w of msg.inputs) feeds[w.name] = toOrt(w);
    const t1 = process.hrtime.bigint();
    let results: InferenceSession.ReturnType;
    try {
      results = await session.run(feeds, msg.outputs, runOptions);
    } catch (err) {
      post({ type: 'run-error', id: msg.id, error: toWireError(err) });
      return;
    }
    const t2 = process.hrtime.bigint();
    const transfer: ArrayBuffer[] = [];
    const outputs = msg.outputs.map((name) => fromOrt(name, results[name] as OrtTensor, transfer));
    for (const t of Object.values(results)) t.dispose();
    const t3 = process.hrtime.bigint();
    const timings = {
      computeInputNs: Number(t1 - t0),
      computeInferNs: Number(t2 - t1),
      computeOutputNs: Number(t3 - t2),
    };
    post({ type: 'result', id: msg.id, outputs, timings }, transfer);
  } catch (err) {
    post({ type: 'run-error', id: msg.id, error: toWireError(err, 'INVALID_ARG') });
  }
}

async function main(): Promise<void> {
  let session: InferenceSession;
  try {
    session = await InferenceSession.create(init.modelPath, init.session as InferenceSession.SessionOptions);
  } catch (err) {
    const e = toWireError(err);
    // onnxruntime-node has no tensor type for BFLOAT16 (ONNX type 16): say so instead of "type 16".
    if (/Unsupported data type: 16\b/.test(e.message)) {
      e.code = 'UNSUPPORTED';
      e.message = `model has a BF16 input or output, which onnxruntime-node cannot represent (${e.message})`;
    } else if (e.code === 'INTERNAL') {
      e.code = 'INVALID_ARG';
    }
    post({ type: 'load-error', error: e });
    return;
  }
  let signature: ModelSignature;
  try {
    signature = signatureOf(session);
  } catch (err) {
    post({ type: 'load-error', error: toWireError(err) });
    await session.release();
    return;
  }
  post({ type: 'ready', signature });
  if (init.mode === 'signature') {
    await session.release();
    port!.close();
    return;
  }
  await serve(session);
}

// A rejection here is an uncaught error of the worker: the host sees its 'error' event and fails the instance.
void main();
