/** Temporary model repositories: the two models with dynamic batching off and on (S5), removed at the end. */
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MODELS, type ModelSpec } from './models.js';

export interface BenchRepos {
  /** Complete configs, no dynamic_batching: requests run one by one (direct scheduler). */
  off: string;
  /** The same plus `dynamic_batching { max_queue_delay_microseconds: … }`. */
  on: string;
  cleanup(): Promise<void>;
}

async function writeModel(repo: string, spec: ModelSpec, batching: boolean): Promise<void> {
  const dir = join(repo, spec.name);
  await mkdir(join(dir, '1'), { recursive: true });
  await copyFile(spec.onnxFile, join(dir, '1', 'model.onnx'));
  const extra = batching ? `dynamic_batching { max_queue_delay_microseconds: ${spec.maxQueueDelayUs} }\n` : '';
  await writeFile(join(dir, 'config.pbtxt'), spec.config + extra);
}

export async function makeRepos(): Promise<BenchRepos> {
  const base = await mkdtemp(join(tmpdir(), 'nereid-bench-'));
  const off = join(base, 'batching-off');
  const on = join(base, 'batching-on');
  for (const spec of Object.values(MODELS)) {
    await writeModel(off, spec, false);
    await writeModel(on, spec, true);
  }
  return { off, on, cleanup: () => rm(base, { recursive: true, force: true }) };
}
