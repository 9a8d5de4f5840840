/**
 * Issue 26 item 4: seed 003's `gpu_execution_accelerator` blocks apply to KIND_GPU instances. On a KIND_CPU
 * instance — written, or chosen by KIND_AUTO on a machine without a GPU (this one) — Triton ignores them; Nereid
 * does the same with one warning at load, instead of a load error blaming a KIND_CPU the user never wrote. A CPU
 * accelerator this build cannot honour (OpenVINO) stays a load error (repository.test.ts).
 */
import assert from 'node:assert/strict';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { callUnary, inferenceClient, int32Of, simpleRaw, startTestGrpcServer } from '../helpers/grpc.js';
import { recordingLogger, type LogEntry } from '../helpers/recording-logger.js';
import { EXAMPLES, startNereid } from '../helpers/server.js';

/** Seed 003's two blocks (its stray braces fixed). */
const SEED_TENSORRT = `optimization { execution_accelerators {
  gpu_execution_accelerator : [ {
    name : "tensorrt"
    parameters { key: "precision_mode" value: "FP16" }
    parameters { key: "max_workspace_size_bytes" value: "1073741824" }
    parameters { key: "trt_engine_cache_enable" value: "1" }
  } ]
}}
`;
const SEED_CUDA = `optimization { execution_accelerators {
  gpu_execution_accelerator : [ {
    name : "cuda"
    parameters { key: "cudnn_conv_use_max_workspace" value: "0" }
    parameters { key: "use_ep_level_unified_stream" value: "1" }
  } ]
}}
`;

async function repoWith(config: string): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'nereid-gpu-ea-'));
  await mkdir(join(root, 'simple'));
  await cp(join(EXAMPLES, 'simple', '1'), join(root, 'simple', '1'), { recursive: true });
  await writeFile(join(root, 'simple', 'config.pbtxt'), config);
  return root;
}

const accelWarnings = (logs: LogEntry[]): LogEntry[] =>
  logs.filter((e) => e.level === 'warn' && /gpu_execution_accelerator/.test(e.msg));

describe('GPU execution accelerators on CPU instances (as Triton: ignored with one warning)', () => {
  const cleanup: string[] = [];
  after(async () => {
    for (const d of cleanup) await rm(d, { recursive: true, force: true });
  });

  for (const [label, block, names, transport] of [
    ['tensorrt', SEED_TENSORRT, 'tensorrt', 'libuv'],
    ['cuda', SEED_CUDA, 'cuda', 'libuv'],
    ['tensorrt (engine threads)', SEED_TENSORRT, 'tensorrt', 'thread'],
  ] as const) {
    for (const [kindLabel, group] of [
      ['KIND_CPU written', 'instance_group [ { kind: KIND_CPU count: 2 } ]\n'],
      ['KIND_AUTO on a machine without a GPU', ''],
    ] as const) {
      it(`seed 003's ${label} block on ${kindLabel}: the model loads, serves HTTP and gRPC, one warning`, async () => {
        const base = await readFile(join(EXAMPLES, 'simple', 'config.pbtxt'), 'utf8');
        const root = await repoWith(base + group + block);
        cleanup.push(root);
        const logger = recordingLogger();
        const backendConfig = new Map(transport === 'thread' ? [['onnxruntime', { transport: 'thread' }]] : []);
        const s = await startNereid({ repositories: [root], logger, backendConfig });
        const grpc = await startTestGrpcServer(s);
        const client = inferenceClient(`127.0.0.1:${grpc.port}`);
        try {
          const res = await fetch(`${s.url}/v2/models/simple/infer`, {
            method: 'POST',
            body: JSON.stringify({
              inputs: [
                { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array(16).fill(2) },
                { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array(16).fill(1) },
              ],
            }),
          });
          assert.equal(res.status, 200, await res.clone().text());
          const body = (await res.json()) as { outputs: { name: string; data: number[] }[] };
          assert.deepEqual(body.outputs.find((o) => o.name === 'OUTPUT0')?.data, Array(16).fill(3));
          const g = await callUnary<{ raw_output_contents: Uint8Array[] }>(client, 'ModelInfer', simpleRaw());
          assert.deepEqual(int32Of(g.raw_output_contents[0] as Uint8Array).slice(0, 3), [1, 2, 3]);

          const warnings = accelWarnings(logger.entries);
          assert.equal(warnings.length, 1, `one warning per load, got ${JSON.stringify(warnings)}`);
          const msg = warnings[0]?.msg as string;
          assert.match(msg, new RegExp(`\\b${names}\\b`));
          assert.match(msg, /ignored/);
          assert.match(msg, /KIND_CPU/);
          assert.match(msg, /KIND_GPU/);
        } finally {
          client.close();
          await grpc.close(1000);
          await s.close();
        }
      });
    }
  }

  it('BAD CONFIG - the same block on a KIND_GPU instance that cannot be honoured here stays a load error', async () => {
    // No silent CPU fall-back for what the user wrote as KIND_GPU (this machine has no usable GPU).
    const base = await readFile(join(EXAMPLES, 'simple', 'config.pbtxt'), 'utf8');
    const root = await repoWith(base + 'instance_group [ { kind: KIND_GPU } ]\n' + SEED_TENSORRT);
    cleanup.push(root);
    const logger = recordingLogger();
    await assert.rejects(startNereid({ repositories: [root], logger }), /KIND_GPU/);
    assert.equal(accelWarnings(logger.entries).length, 0, 'a KIND_GPU instance never ignores its accelerator');
  });
});
