// First: must run before onnxruntime-node (and onnxruntime-common) are evaluated.
import './float16-off.js';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { InferenceSession, Tensor as OrtTensor } from 'onnxruntime-node';
import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError, NereidError, NotFoundError, UnsupportedError, type ErrorCode } from '../../core/errors.js';
import type { Tensor } from '../../core/tensor.js';
import { completeConfig } from '../autocomplete.js';
import { batchOutputNames, joinInputs, splitOutputs } from '../batching.js';
import type {
  EngineAdapter,
  EngineInstance,
  EngineLoadContext,
  EngineModel,
  ModelSignature,
  TensorSignature,
} from '../contract.js';
import { dataTypeFromOrt, ORT_TYPES } from './datatypes.js';
import { sessionOptionsFor } from './options.js';

/**
 * The onnxruntime engine on onnxruntime-node's JS API. Runs in an engine thread (worker transport): session
 * creation and run() are synchronous native calls that block their thread for up to tens of ms, so they never
 * happen on the main thread. One session per instance; onnxruntime's own intra/inter-op pools parallelize a run.
 */

export const DEFAULT_MODEL_FILENAME = 'model.onnx';

/**
 * An ONNX model is a file, or (for models with external data) a directory holding `model.onnx`, as in Triton.
 */
export async function resolveModelFile(modelPath: string): Promise<string> {
  let st;
  try {
    st = await stat(modelPath);
  } catch (err) {
    throw new NotFoundError(`model file '${modelPath}' does not exist`, { cause: err });
  }
  if (!st.isDirectory()) return modelPath;
  const inner = join(modelPath, DEFAULT_MODEL_FILENAME);
  try {
    await stat(inner);
  } catch (err) {
    throw new NotFoundError(`model directory '${modelPath}' has no ${DEFAULT_MODEL_FILENAME}`, { cause: err });
  }
  return inner;
}

/** ORT reports bad inputs (shape, type, names) as INVALID_ARGUMENT or TypeError/RangeError from its JS checks. */
function ortError(err: unknown, fallback: ErrorCode = 'INTERNAL'): NereidError {
  if (err instanceof NereidError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const invalid =
    err instanceof TypeError ||
    err instanceof RangeError ||
    /INVALID_ARGUMENT|invalid dimensions|invalid input|invalid output|missing|Unexpected input data type/i.test(
      message,
    );
  return new NereidError(invalid ? 'INVALID_ARG' : fallback, `onnxruntime: ${message}`);
}

/** A session that fails to create: a bad model or an option ORT rejects is the operator's to fix (INVALID_ARG). */
function createError(err: unknown): NereidError {
  const e = ortError(err);
  // onnxruntime-node has no tensor type for BFLOAT16 (ONNX type 16): say so instead of "type 16".
  if (/Unsupported data type: 16\b/.test(e.message)) {
    return new UnsupportedError(
      `model has a BF16 input or output, which onnxruntime-node cannot represent (${e.message})`,
    );
  }
  return e.code === 'INTERNAL' ? new InvalidArgError(e.message) : e;
}

function signatureOf(session: InferenceSession): ModelSignature {
  const conv = (metas: readonly InferenceSession.ValueMetadata[], kind: string): TensorSignature[] =>
    metas.map((m) => {
      if (!m.isTensor) throw new UnsupportedError(`${kind} '${m.name}' is not a tensor (sequence or map)`);
      const datatype = dataTypeFromOrt(m.type);
      if (datatype === undefined) {
        throw new UnsupportedError(
          `${kind} '${m.name}' has onnxruntime type '${m.type}', which Nereid does not support`,
        );
      }
      // A symbolic dim is a string (its dim_param, possibly empty); a fixed dim a non-negative number.
      return { name: m.name, datatype, dims: m.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)) };
    });
  return { inputs: conv(session.inputMetadata, 'input'), outputs: conv(session.outputMetadata, 'output') };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

/**
 * BYTES elements → strings for an ORT string tensor. ORT's string tensors hold text, so an element that is not
 * valid UTF-8 is an INVALID_ARG rather than being silently replaced with U+FFFD.
 */
function toStrings(t: Tensor): string[] {
  return (t.data as Uint8Array[]).map((e, i) => {
    // onnxruntime-node copies strings as C strings: an element with a NUL byte would come back cut short.
    if (e.includes(0)) {
      throw new InvalidArgError(
        `input '${t.name}': element ${i} contains a NUL byte, which onnxruntime string tensors cannot carry (it would be cut short)`,
      );
    }
    try {
      return utf8.decode(e);
    } catch (err) {
      throw new InvalidArgError(
        `input '${t.name}': element ${i} is not valid UTF-8; onnxruntime string tensors carry text only`,
        {
          cause: err,
        },
      );
    }
  });
}

function toOrt(t: Tensor): OrtTensor {
  const ortType = ORT_TYPES[t.datatype];
  if (ortType === undefined) {
    throw new InvalidArgError(
      `input '${t.name}': ${t.datatype} has no onnxruntime-node tensor type; send FP32 or FP16`,
    );
  }
  if (t.datatype === 'BYTES') return new OrtTensor('string', toStrings(t), t.shape);
  // BOOL is a Uint8Array, FP16 a Uint16Array of raw bits: both exactly what ORT's 'bool'/'float16' accept.
  return new OrtTensor(ortType as 'float32', t.data as Float32Array, t.shape);
}

function fromOrt(name: string, t: OrtTensor): Tensor {
  const datatype = dataTypeFromOrt(t.type);
  if (datatype === undefined)
    throw new NereidError('INTERNAL', `output '${name}': unsupported onnxruntime type '${t.type}'`);
  const shape = t.dims.slice();
  if (datatype === 'BYTES') return { name, datatype, shape, data: (t.data as string[]).map((s) => encoder.encode(s)) };
  // onnxruntime-node 1.30 returns outputs in fresh ArrayBuffers (offset 0, whole buffer): given to the host as is.
  return { name, datatype, shape, data: t.data as Tensor['data'] & Float32Array };
}

/**
 * ORT's own log level follows ours: verbose only when we are. Otherwise only fatal: a run error (a client's
 * out-of-range token id, say) already reaches the client and our log through the error we return, and ORT
 * writing each one to stderr again would let any client flood it.
 */
function ortLogLevel(level: string): 0 | 1 | 2 | 3 | 4 {
  return level === 'trace' ? 0 : level === 'debug' ? 1 : 4;
}

class OrtInstance implements EngineInstance {
  readonly #session: InferenceSession;
  readonly #run: InferenceSession.RunOptions;
  readonly #ragged: ReadonlySet<string>;

  constructor(session: InferenceSession, run: InferenceSession.RunOptions, ragged: ReadonlySet<string>) {
    this.#session = session;
    this.#run = run;
    this.#ragged = ragged;
  }

  /** onnxruntime-node cannot stop a run: the signal is not consulted; the host answers cancelled requests. */
  async execute(
    ...[requests, responder]: Parameters<EngineInstance['execute']>
  ): ReturnType<EngineInstance['execute']> {
    const t0 = process.hrtime.bigint();
    const feeds: Record<string, OrtTensor> = {};
    try {
      for (const t of joinInputs(requests, this.#ragged)) feeds[t.name] = toOrt(t);
    } catch (err) {
      throw ortError(err, 'INVALID_ARG');
    }
    const names = batchOutputNames(requests);
    const t1 = process.hrtime.bigint();
    let results: InferenceSession.ReturnType;
    try {
      results = await this.#session.run(feeds, names, this.#run);
    } catch (err) {
      throw ortError(err);
    }
    const t2 = process.hrtime.bigint();
    const outputs = names.map((n) => fromOrt(n, results[n] as OrtTensor));
    splitOutputs(requests, outputs).forEach((r, i) => responder.send(i, r, { final: true }));
    const t3 = process.hrtime.bigint();
    return { computeInputNs: Number(t1 - t0), computeInferNs: Number(t2 - t1), computeOutputNs: Number(t3 - t2) };
  }

  destroy(): Promise<void> {
    return this.#session.release();
  }
}

async function openSession(
  modelPath: string,
  config: ModelConfig,
  backendConfig: EngineLoadContext['backendConfig'],
  logLevel: string,
) {
  const mapped = sessionOptionsFor(config, backendConfig);
  const session = { ...mapped.session, logSeverityLevel: ortLogLevel(logLevel) } as InferenceSession.SessionOptions;
  try {
    return { session: await InferenceSession.create(await resolveModelFile(modelPath), session), mapped };
  } catch (err) {
    throw createError(err);
  }
}

export const adapter: EngineAdapter = {
  /**
   * Reads names, datatypes and dims (-1 for symbolic or unknown) with graph optimizations off (faster, and they
   * do not change the interface) and one thread (the session runs nothing), then applies Triton's rules.
   */
  async autoComplete(config, ctx) {
    const file = await resolveModelFile(ctx.modelPath);
    let session: InferenceSession;
    try {
      session = await InferenceSession.create(file, {
        graphOptimizationLevel: 'disabled',
        intraOpNumThreads: 1,
        interOpNumThreads: 1,
        logSeverityLevel: 4,
      });
    } catch (err) {
      throw createError(err);
    }
    try {
      const warnings: string[] = [];
      const completed = completeConfig(config, signatureOf(session), ctx.modelName, {
        autoComplete: ctx.autoComplete,
        defaultMaxBatchSize: defaultMaxBatchSize(ctx.backendConfig['default-max-batch-size']),
        warn: (w) => warnings.push(w),
      });
      return { config: completed, warnings };
    } finally {
      await session.release();
    }
  },

  async load(ctx): Promise<EngineModel> {
    const ragged = new Set((ctx.config.input ?? []).filter((i) => i.allow_ragged_batch).map((i) => i.name as string));
    return {
      async createInstance() {
        const { session, mapped } = await openSession(ctx.modelPath, ctx.config, ctx.backendConfig, ctx.logLevel);
        return new OrtInstance(session, mapped.run as InferenceSession.RunOptions, ragged);
      },
      async unload() {},
    };
  },
};

/** `--backend-config=onnxruntime,default-max-batch-size=N` (Triton's default 4). */
export function defaultMaxBatchSize(s: string | undefined): number {
  if (s === undefined) return 4;
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0) {
    throw new InvalidArgError(`backend-config default-max-batch-size must be a non-negative integer, got '${s}'`);
  }
  return n;
}
