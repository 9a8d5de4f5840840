import { execFile } from 'node:child_process';
import { errorFromCompact, UnavailableError, type CompactErrorData } from '../../core/errors.js';
import type { PlanFacts } from './facts.js';
import type { TensorRTEnvironment } from './environment.js';

/**
 * Reads a plan's facts in a short-lived Python process (`nereid_python.engines.tensorrt.probe`): TensorRT needs a
 * GPU even to read an engine, so this is where "no GPU", "TensorRT not installed" and "not a plan" first show,
 * each with the engine process's own message (TensorRT's where it has one).
 */

export interface ProbeOptions {
  device: number;
  versionCompatible: boolean;
  plugins: readonly string[];
  timeoutMs: number;
  signal?: AbortSignal;
}

export function probePlan(plan: string, env: TensorRTEnvironment, o: ProbeOptions): Promise<PlanFacts> {
  const args = [
    '-m',
    'nereid_python.engines.tensorrt.probe',
    '--plan',
    plan,
    '--device',
    String(o.device),
    '--options',
    JSON.stringify({ version_compatible: o.versionCompatible, plugins: o.plugins }),
  ];
  return new Promise((resolve, reject) => {
    execFile(
      env.executable,
      args,
      { env: env.env, timeout: o.timeoutMs, maxBuffer: 16 << 20, signal: o.signal },
      (err, stdout, stderr) => {
        const line = stdout.trim().split('\n').pop() ?? '';
        let answer: { facts?: PlanFacts; error?: CompactErrorData } | undefined;
        try {
          answer = line ? (JSON.parse(line) as typeof answer) : undefined;
        } catch {
          answer = undefined;
        }
        if (answer?.facts) {
          resolve(answer.facts);
          return;
        }
        if (answer?.error) {
          reject(errorFromCompact(answer.error, 'the probe failed', 'UNAVAILABLE'));
          return;
        }
        const tail = stderr.trim().split('\n').slice(-3).join(' | ');
        const why = err ? err.message.split('\n')[0] : 'it printed no answer';
        reject(
          new UnavailableError(
            `cannot read TensorRT plan '${plan}' with ${env.executable} (from ${env.source}): ${why}${tail ? `: ${tail}` : ''}`,
          ),
        );
      },
    );
  });
}
