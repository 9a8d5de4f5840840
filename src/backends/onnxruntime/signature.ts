import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError, NotFoundError } from '../../core/errors.js';
import { completeConfig } from '../autocomplete.js';
import type { BackendConfig, ModelSignature } from '../contract.js';
import { ortApi } from './capi/api.js';
import { acquireAnyEnv } from './capi/env.js';
import { createSessionOptions } from './capi/session-options.js';
import { OrtSession } from './capi/session.js';
import { createError } from './errors.js';
import { overridableSignatures } from './initializers.js';
import { planSession } from './options-capi.js';

/**
 * A model's file and interface before any instance exists: where the ONNX file is, its inputs and outputs read
 * through a short-lived session, and Triton's auto-complete on them.
 */

export const DEFAULT_MODEL_FILENAME = 'model.onnx';

/** An ONNX model is a file, or (models with external data) a directory holding `model.onnx`, as in Triton. */
export async function resolveModelFile(modelPath: string): Promise<string> {
  let st;
  try {
    st = await stat(modelPath);
  } catch (err) {
    throw new NotFoundError(`model file '${modelPath}' does not exist`, { cause: err });
  }
  if (!st.isDirectory()) return modelPath;
  const inner = join(modelPath, DEFAULT_MODEL_FILENAME);
  if (!existsSync(inner)) throw new NotFoundError(`model directory '${modelPath}' has no ${DEFAULT_MODEL_FILENAME}`);
  return inner;
}

/** `--backend-config=onnxruntime,default-max-batch-size=N` (Triton's default 4). */
export function defaultMaxBatchSize(s: string | undefined): number {
  if (s === undefined) return 4;
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0) {
    throw new InvalidArgError(`backend-config default-max-batch-size must be a non-negative integer, got '${s}'`);
  }
  return n;
}

/**
 * Reads a model's inputs and outputs through a short-lived session: graph optimizations off (faster, and they do
 * not change the interface), one thread (it runs nothing), on a pool thread. Dims are -1 where symbolic.
 */
export async function readSignature(modelPath: string, signal?: AbortSignal): Promise<ModelSignature> {
  const file = await resolveModelFile(modelPath);
  const lease = acquireAnyEnv(4);
  const api = ortApi();
  try {
    const plan = planSession({
      optimization: { graph: { level: 2 } },
      parameters: { intra_op_thread_count: { string_value: '1' }, inter_op_thread_count: { string_value: '1' } },
    });
    const options = createSessionOptions({
      plan,
      providers: [],
      globalThreadPool: lease.globalThreadPool,
      logSeverity: 4,
      logId: 'signature',
    });
    let session: OrtSession;
    try {
      session = await OrtSession.create(lease.env, file, options, signal);
    } catch (err) {
      throw createError(err, [], `model file '${file}'`);
    } finally {
      api.ReleaseSessionOptions(options);
    }
    try {
      return session.signature();
    } finally {
      await session.release();
    }
  } finally {
    lease.release();
  }
}

/** What autoComplete is given (the lead's EngineAutoCompleteContext). */
export interface OrtAutoCompleteContext {
  modelName: string;
  modelPath: string;
  backendConfig: BackendConfig;
  autoComplete: boolean;
}

/** Triton's auto-complete for onnxruntime: the signature read through the C API, then Triton's rules. */
export async function autoCompleteOnnx(
  config: ModelConfig,
  ctx: OrtAutoCompleteContext,
): Promise<{ config: ModelConfig; warnings: string[] }> {
  const sig = await readSignature(ctx.modelPath);
  const warnings: string[] = [];
  // Only a config that declares inputs the session does not list needs the file read for its initializers
  // (onnxruntime's overridable initializers: a request may leave them out; declared `optional: true`).
  const listed = new Set(sig.inputs.map((t) => t.name));
  const optionalInputs = (config.input ?? []).some((i) => !listed.has(i.name as string))
    ? overridableSignatures(new Uint8Array(await readFile(await resolveModelFile(ctx.modelPath))), ctx.modelName)
    : [];
  const completed = completeConfig(config, sig, ctx.modelName, {
    optionalInputs,
    autoComplete: ctx.autoComplete,
    defaultMaxBatchSize: defaultMaxBatchSize(ctx.backendConfig['default-max-batch-size']),
    warn: (w) => warnings.push(w),
  });
  return { config: completed, warnings };
}
