import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { errorFromCompact, UnavailableError, type CompactErrorData } from '../../core/errors.js';
import type { TensorRTEnvironment } from './environment.js';

/**
 * TensorRT's builder in a Python process (python/nereid_python/engines/tensorrt/convert.py): `nereid convert` and
 * the tensorrt backend's ONNX loads (onnx-plan.ts) both run it. Progress lines (stderr) go to `onLine` as they come;
 * the last stdout line is the answer.
 */

/** One network I/O tensor's type and layout, trtexec's `type:format`. */
export interface IOFormat {
  dtype: 'fp32' | 'fp16' | 'bf16' | 'int32' | 'int64' | 'int8' | 'uint8' | 'bool';
  format: 'linear';
}

export interface ConvertSpec {
  onnx: string;
  output: string;
  shapes: Record<string, { min: number[]; opt: number[]; max: number[] }>;
  precision: 'fp32' | 'fp16' | 'bf16';
  int8: boolean;
  calibration_cache?: string;
  workspace_mib?: number;
  version_compatible: boolean;
  exclude_lean_runtime?: boolean;
  timing_cache?: string;
  device: number;
  /** Types of the plan's inputs and outputs, in the network's order (one entry: all of them); absent: the model's. */
  io_formats?: { inputs?: IOFormat[]; outputs?: IOFormat[] };
  /** Inputs with no shapes whose only dynamic dim is the first get 1..max (opt) there (max_batch_size). */
  batch?: { opt: number; max: number };
  /** Where shapes come from, for the message about an input with dynamic dims and none (default: the flags). */
  shapes_from?: string;
}

export function runBuilder(
  env: TensorRTEnvironment,
  spec: ConvertSpec,
  onLine: (line: string) => void,
  signal?: AbortSignal,
): Promise<Record<string, unknown>> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(
      env.executable,
      ['-m', 'nereid_python.engines.tensorrt.convert', '--spec', JSON.stringify(spec)],
      { env: env.env, stdio: ['ignore', 'pipe', 'pipe'], signal, killSignal: 'SIGKILL' },
    );
    let last = '';
    createInterface({ input: child.stdout }).on('line', (l) => {
      if (l.trim() !== '') last = l;
    });
    createInterface({ input: child.stderr }).on('line', onLine);
    child.on('error', (e) => {
      if (signal?.aborted) reject(new UnavailableError('the TensorRT build was cancelled', { cause: e }));
      else reject(new UnavailableError(`cannot run '${env.executable}' (from ${env.source}): ${e.message}`));
    });
    child.on('close', (code, sig) => {
      let answer: { error?: CompactErrorData } & Record<string, unknown>;
      try {
        answer = JSON.parse(last) as typeof answer;
      } catch {
        reject(
          new UnavailableError(
            `the TensorRT builder process (${env.executable}) ended with ${sig ?? `code ${code}`} and no answer`,
          ),
        );
        return;
      }
      if (answer.error) {
        reject(errorFromCompact(answer.error, 'the builder failed', 'UNAVAILABLE'));
        return;
      }
      resolvePromise(answer);
    });
  });
}
