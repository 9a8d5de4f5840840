/**
 * Issue 25 item 2: onnxruntime's TensorRT execution provider (seed 003's `gpu_execution_accelerator: tensorrt`).
 * On this machine (no GPU, no TensorRT) what can be shown for real is the refusal: a KIND_GPU instance whose
 * TensorRT provider library, the CUDA provider library beside it, or TensorRT's libnvinfer.so.10 is missing fails
 * its load naming the library (onnxruntime's Python API would run it on the CPU instead), and the provider's
 * paths are confined: relative ones to the model folder, a load request's through the filesystem. The folder
 * onnxruntime is loaded from is a temporary one here (NEREID_ORT_LIB_DIR, set before anything loads onnxruntime)
 * holding onnxruntime-node's library and empty stand-ins for the provider libraries: Nereid checks them before it
 * asks onnxruntime, so nothing ever loads a stand-in. The device check (scripts/gpu/ort-trt-check.sh) shows the rest.
 */
import assert from 'node:assert/strict';
import { cp, mkdir, mkdtemp, readFile, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import koffi from 'koffi';
import { ORT_LIB_DIR_ENV, ortLibraryPath } from '../../src/backends/onnxruntime/capi/library.js';
import { callUnary, inferenceClient, startTestGrpcServer } from '../helpers/grpc.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

const SHARED = 'libonnxruntime_providers_shared.so';
const TRT = 'libonnxruntime_providers_tensorrt.so';
const CUDA = 'libonnxruntime_providers_cuda.so';

/** Whether this machine has TensorRT 10 on its library path (then the libnvinfer refusal cannot be shown). */
function hasNvinfer(): boolean {
  try {
    koffi.load('libnvinfer.so.10');
    return true;
  } catch {
    return false;
  }
}

const accelerator = (parameters: Record<string, string>): string =>
  `instance_group [ { kind: KIND_GPU } ]
optimization { execution_accelerators { gpu_execution_accelerator : [ {
  name : "tensorrt"
${Object.entries(parameters)
  .map(([k, v]) => `  parameters { key: "${k}" value: "${v}" }`)
  .join('\n')}
} ] } }
`;

const post = (url: string, body?: unknown): Promise<Response> =>
  fetch(url, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body) });

describe("onnxruntime's TensorRT provider: refused where it cannot run, its paths confined", () => {
  let libDir: string;
  let repo: string;
  let s: TestServer;
  let code: TestServer;
  let client: grpc.Client;
  let grpcServer: Awaited<ReturnType<typeof startTestGrpcServer>>;
  let base: string;

  const model = async (name: string, parameters: Record<string, string>): Promise<void> => {
    await mkdir(join(repo, name));
    await cp(join(EXAMPLES, 'simple', '1'), join(repo, name, '1'), { recursive: true });
    await writeFile(join(repo, name, 'config.pbtxt'), base.replace('"simple"', `"${name}"`) + accelerator(parameters));
  };

  before(async () => {
    const real = ortLibraryPath();
    libDir = await mkdtemp(join(tmpdir(), 'nereid-ort-lib-'));
    await symlink(real, join(libDir, 'libonnxruntime.so.1'));
    for (const f of [SHARED, TRT, CUDA]) await writeFile(join(libDir, f), '');
    process.env[ORT_LIB_DIR_ENV] = libDir;
    repo = await mkdtemp(join(tmpdir(), 'nereid-ort-trt-'));
    base = await readFile(join(EXAMPLES, 'simple', 'config.pbtxt'), 'utf8');
    const seed = { precision_mode: 'FP16', max_workspace_size_bytes: '1073741824', trt_engine_cache_enable: '1' };
    await model('seed003', seed);
    await model('escapes', { ...seed, trt_engine_cache_path: '../../elsewhere' });
    await model('timing_escapes', {
      trt_timing_cache_enable: '1',
      trt_timing_cache_path: '/nonexistent/nereid-trt-timing',
    });
    await model('bad_table', { precision_mode: 'INT8', int8_calibration_table_name: '../calibration' });
    await model('bad_level', { trt_builder_optimization_level: '9' });
    await symlink('/etc', join(repo, 'seed003', '1', 'out'));
    // GPU 0 stands for the H200's: the instance reaches the engine, whose refusal is the subject here.
    s = await startNereid({ repositories: [repo], modelControlMode: 'explicit', exitOnError: false, gpus: [0] });
    code = await startNereid({
      repositories: [repo],
      gpus: [0],
      modelControlMode: 'explicit',
      exitOnError: false,
      allowCodeInLoadRequests: true,
    });
    grpcServer = await startTestGrpcServer(s);
    client = inferenceClient(`127.0.0.1:${grpcServer.port}`);
  });
  after(async () => {
    client?.close();
    await grpcServer?.close(0);
    await s?.close();
    await code?.close();
    delete process.env[ORT_LIB_DIR_ENV];
    for (const d of [libDir, repo]) if (d) await rm(d, { recursive: true, force: true });
  });

  /** Loads `name` over HTTP and gRPC; both fail INVALID_ARG with `pattern`, and the model is not ready. */
  async function refused(name: string, pattern: RegExp): Promise<void> {
    const res = await post(`${s.url}/v2/repository/models/${name}/load`);
    assert.equal(res.status, 400, name);
    assert.match(((await res.json()) as { error: string }).error, pattern);
    await assert.rejects(
      callUnary(client, 'RepositoryModelLoad', { model_name: name }),
      (e: grpc.ServiceError) => e.code === 3 && pattern.test(e.details),
    );
    assert.equal((await fetch(`${s.url}/v2/models/${name}/ready`)).status, 400, `${name} must not be ready`);
  }

  it("REGRESSION silent CPU fall-back - seed 003's block without libnvinfer.so.10 fails the load naming it", async (t) => {
    if (hasNvinfer()) return t.skip('this machine has libnvinfer.so.10');
    await refused(
      'seed003',
      /TensorRT execution provider is unavailable: the library 'libnvinfer\.so\.10' is missing; .*nereid tensorrt setup.*LD_LIBRARY_PATH.*refuses to run a KIND_GPU instance on the CPU/,
    );
  });

  it('REGRESSION silent CPU fall-back - the TensorRT provider without the CUDA provider library beside it is refused', async () => {
    for (const missing of [CUDA, TRT]) {
      await unlink(join(libDir, missing));
      try {
        await refused(
          'seed003',
          new RegExp(
            `TensorRT execution provider is unavailable: the library '${missing.replace(/\./g, '\\.')}' is missing; copy ${SHARED}, ${TRT}, ${CUDA} .*onnxruntime-gpu 1\\.30\\.0`,
          ),
        );
      } finally {
        await writeFile(join(libDir, missing), '');
      }
    }
  });

  it('BAD CONFIG - cache paths leaving the model folder and bad option values are INVALID_ARG (HTTP and gRPC)', async () => {
    await refused('escapes', /trt_engine_cache_path': '..\/..\/elsewhere' leaves the version folder/);
    await refused('bad_table', /int8_calibration_table_name': expected a file name inside trt_engine_cache_path/);
    await refused('bad_level', /trt_builder_optimization_level': expected an integer from 0 to 5, got '9'/);
  });

  it("an absolute path in the repository's config is the operator's: it passes to the provider check", async (t) => {
    if (hasNvinfer()) return t.skip('this machine has libnvinfer.so.10');
    await refused('timing_escapes', /the library 'libnvinfer\.so\.10' is missing/);
  });

  it('BAD CALL - a load request may name cache paths only inside the model folder (code allowed)', async () => {
    const config = (parameters: Record<string, string>): string =>
      JSON.stringify({
        name: 'seed003',
        platform: 'onnxruntime_onnx',
        max_batch_size: 8,
        instance_group: [{ kind: 'KIND_GPU' }],
        optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'tensorrt', parameters }] } },
      });
    for (const [parameters, pattern] of [
      [{ trt_engine_cache_path: '/tmp/trt' }, /trt_engine_cache_path '[^']*' is an absolute path/],
      [{ trt_timing_cache_path: '../../../x' }, /trt_timing_cache_path '..\/..\/..\/x' leaves the model folder/],
      [
        { trt_engine_cache_path: 'out/cache' },
        /'out\/cache' resolves outside the model folder through a symbolic link/,
      ],
      [{ trt_extra_plugin_lib_paths: 'a.so;/usr/lib/b.so' }, /trt_extra_plugin_lib_paths '[^']*b\.so' is an absolute/],
    ] as const) {
      const res = await post(`${code.url}/v2/repository/models/seed003/load`, {
        parameters: { config: config(parameters) },
      });
      assert.equal(res.status, 400, JSON.stringify(parameters));
      const error = ((await res.json()) as { error: string }).error;
      assert.match(error, pattern);
      assert.match(error, /must stay within model directory/);
    }
    if (hasNvinfer()) return;
    // Inside the model folder it passes confinement and reaches the provider check.
    const res = await post(`${code.url}/v2/repository/models/seed003/load`, {
      parameters: { config: config({ trt_engine_cache_enable: '1', trt_engine_cache_path: 'trt-cache' }) },
    });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: string }).error, /libnvinfer\.so\.10' is missing/);
  });
});
