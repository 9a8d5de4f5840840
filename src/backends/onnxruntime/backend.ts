import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ModelConfig } from '../../config/model-config.js';
import { NotFoundError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { Backend, BackendConfig, LoadContext, LoadedModel, ModelSignature } from '../backend.js';
import { OrtInstance, startSessionWorker } from './instance.js';
import { instanceCount, sessionOptionsFor } from './options.js';
import type { WorkerInit } from './protocol.js';

/**
 * The onnxruntime backend: Triton's `onnxruntime` backend / `onnxruntime_onnx` platform on onnxruntime-node
 * (CPU execution provider). Each instance of `instance_group` is one worker thread with one session.
 */

const DEFAULT_MODEL_FILENAME = 'model.onnx';

/**
 * An ONNX model is a file, or (for models with external data) a directory holding `model.onnx`,
 * as in Triton.
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

/**
 * ORT's own log level follows ours: verbose only when we are. Otherwise only fatal: a run error (a client's
 * out-of-range token id, say) already reaches the client and our log through the error we return, and ORT
 * writing each one to stderr again would let any client flood it.
 */
function ortLogLevel(logger: Logger): 0 | 1 | 2 | 3 | 4 {
  return logger.level === 'trace' ? 0 : logger.level === 'debug' ? 1 : 4;
}

/**
 * Session-creation options for one model. `optimizedModelFilePath` is a test hook (ORT writes the optimized
 * graph there) used to observe the graph optimization level.
 */
function workerInit(
  mode: WorkerInit['mode'],
  modelFile: string,
  config: ModelConfig,
  backendConfig: BackendConfig,
  logger: Logger,
): WorkerInit {
  const mapped = sessionOptionsFor(config, backendConfig);
  if (mode === 'instance') for (const w of mapped.warnings) logger.warn(w);
  return {
    mode,
    modelPath: modelFile,
    session: { ...mapped.session, logSeverityLevel: ortLogLevel(logger) },
    run: mapped.run,
  };
}

/** Creates the onnxruntime backend. Stateless: every model owns its workers; `close()` has nothing to free. */
export function onnxruntimeBackend(): Backend {
  return {
    name: 'onnxruntime',
    platforms: ['onnxruntime_onnx'],
    defaultModelFilename: DEFAULT_MODEL_FILENAME,

    /**
     * Reads names, datatypes and dims (-1 for symbolic or unknown) in a short-lived worker: creating a session
     * blocks its thread. Graph optimizations are off for it (faster, and they do not change the interface),
     * and threads are kept to one because the session runs nothing.
     */
    async signature(modelPath, ctx): Promise<ModelSignature> {
      const modelFile = await resolveModelFile(modelPath);
      const config: ModelConfig = { ...ctx.config, optimization: undefined, parameters: undefined };
      const init = workerInit('signature', modelFile, config, {}, { level: 'silent' } as Logger);
      init.session = {
        ...init.session,
        graphOptimizationLevel: 'disabled',
        intraOpNumThreads: 1,
        interOpNumThreads: 1,
      };
      const { worker, signature } = await startSessionWorker(init);
      // The worker releases its session and exits on its own; don't keep the process alive for it.
      worker.unref();
      return signature;
    },

    async load(ctx: LoadContext): Promise<LoadedModel> {
      const count = instanceCount(ctx.config);
      const modelFile = await resolveModelFile(ctx.modelPath);
      const logger = ctx.logger.child({ model: ctx.name, version: ctx.version });
      const init = workerInit('instance', modelFile, ctx.config, ctx.backendConfig, logger);
      // Sessions are created in parallel, each on its own thread; if one fails, the others are closed.
      const started = await Promise.allSettled(
        Array.from({ length: count }, () => startSessionWorker(init, ctx.signal)),
      );
      const instances = started.flatMap((s, i) =>
        s.status === 'fulfilled' ? [new OrtInstance(`${ctx.name}_${i}`, s.value, logger)] : [],
      );
      const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed !== undefined) {
        await Promise.all(instances.map((i) => i.close()));
        throw failed.reason;
      }
      let closing: Promise<void> | undefined;
      return {
        instances,
        close: () => (closing ??= Promise.all(instances.map((i) => i.close())).then(() => undefined)),
      };
    },

    async close(): Promise<void> {},
  };
}
