import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { createLogger } from '../../src/core/logger.js';
import { FLAGS, parseFlags } from '../../src/cli/flags.js';
import { EXAMPLES, startNereid, TEST_FRONTEND_THREADS } from '../helpers/server.js';
import { FIXTURES } from '../helpers/python-models.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';
import * as grpc from '@grpc/grpc-js';

/**
 * Issue 26 item 3: every Triton 2.x `tritonserver` flag is accepted; those with a meaning are implemented
 * (`--model-load-thread-count` bounds concurrent loads, `--model-config-name` picks configs/<name>.pbtxt,
 * `--trace-log-frequency`), the others log one start-up line saying they have no effect and why. Triton's own
 * documented command lines start Nereid unchanged (only their `...` and their repository path are filled in).
 */

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

/** Every long option of Triton 2.x's `tritonserver` (its command_line_parser.cc), deprecated ones included. */
const TRITON_2X_FLAGS = [
  'help',
  'log-verbose',
  'log-info',
  'log-warning',
  'log-error',
  'log-format',
  'log-file',
  'id',
  'model-store',
  'model-repository',
  'exit-on-error',
  'disable-auto-complete-config',
  'strict-model-config',
  'strict-readiness',
  'allow-http',
  'http-header-forward-pattern',
  'http-port',
  'reuse-http-port',
  'http-address',
  'http-thread-count',
  'http-restricted-api',
  'allow-grpc',
  'grpc-port',
  'reuse-grpc-port',
  'grpc-address',
  'grpc-header-forward-pattern',
  'grpc-infer-thread-count',
  'grpc-infer-allocation-pool-size',
  'grpc-max-response-pool-size',
  'grpc-use-ssl',
  'grpc-use-ssl-mutual',
  'grpc-server-cert',
  'grpc-server-key',
  'grpc-root-cert',
  'grpc-infer-response-compression-level',
  'grpc-keepalive-time',
  'grpc-keepalive-timeout',
  'grpc-keepalive-permit-without-calls',
  'grpc-http2-max-pings-without-data',
  'grpc-http2-min-recv-ping-interval-without-data',
  'grpc-http2-max-ping-strikes',
  'grpc-restricted-protocol',
  'grpc-max-connection-age',
  'grpc-max-connection-age-grace',
  'allow-sagemaker',
  'sagemaker-port',
  'sagemaker-safe-port-range',
  'sagemaker-thread-count',
  'allow-vertex-ai',
  'vertex-ai-port',
  'vertex-ai-thread-count',
  'vertex-ai-default-model',
  'allow-metrics',
  'allow-gpu-metrics',
  'allow-cpu-metrics',
  'metrics-address',
  'metrics-port',
  'metrics-interval-ms',
  'metrics-config',
  'trace-file',
  'trace-level',
  'trace-rate',
  'trace-count',
  'trace-log-frequency',
  'trace-config',
  'model-control-mode',
  'repository-poll-secs',
  'load-model',
  'model-config-name',
  'rate-limit',
  'rate-limit-resource',
  'pinned-memory-pool-byte-size',
  'cuda-memory-pool-byte-size',
  'cuda-virtual-address-size',
  'response-cache-byte-size',
  'cache-config',
  'cache-directory',
  'min-supported-compute-capability',
  'exit-timeout-secs',
  'backend-directory',
  'repoagent-directory',
  'buffer-manager-thread-count',
  'model-load-thread-count',
  'model-load-retry-count',
  'backend-config',
  'host-policy',
  'model-load-gpu-limit',
  'model-namespacing',
  'enable-peer-access',
  'allow-client-shm',
];

/**
 * Command lines from Triton's documentation, each as its page writes it after `tritonserver` (the pages end some
 * with `...`, which the test fills with the repository and test ports).
 */
const DOCUMENTED = [
  // docs/user_guide/trace.md
  '--trace-config triton,file=/tmp/trace.json --trace-config triton,log-frequency=50 --trace-config rate=100 --trace-config level=TIMESTAMPS --trace-config count=100',
  // docs/user_guide/optimization.md (host policy)
  '--host-policy=gpu_0,numa-node=0 --host-policy=gpu_0,cpu-cores=0-15',
  // docs/user_guide/rate_limiter.md
  '--rate-limit=execution_count --rate-limit-resource=R1:10 --rate-limit-resource=R2:5:0 --rate-limit-resource=R2:8:1 --rate-limit-resource=R3:2',
  // docs/user_guide/response_cache.md
  '--cache-config local,size=1048576',
  // docs/user_guide/metrics.md
  '--metrics-config summary_latencies=true',
];

/** The flags issue 26 names, in Triton's forms, with values a deployment would give. */
const NAMED = [
  '--pinned-memory-pool-byte-size=268435456',
  '--cuda-memory-pool-byte-size=0:67108864',
  '--model-load-thread-count=2',
  '--backend-directory=/opt/tritonserver/backends',
  '--repoagent-directory=/opt/tritonserver/repoagents',
  '--buffer-manager-thread-count=2',
  '--model-namespacing=true',
  '--model-load-retry-count=1',
  '--cache-directory=/opt/tritonserver/caches',
  '--min-supported-compute-capability=6.0',
  // Seed 000's line (its <boolean> filled in), as argv carries it without a shell: the quotes stay.
  '--backend-config=tensorrt,coalesce-request-input=true,plugins="/path/plugin1.so;/path2/plugin2.so,version-compatible=true"',
];

/** Runs `nereid serve <args>` until HTTP is up, then SIGTERM; resolves with its log and exit code. */
async function serveOnce(args: string[]): Promise<{ logs: string; code: number | null }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      MAIN,
      'serve',
      ...args,
      `--http-thread-count=${TEST_FRONTEND_THREADS}`,
      '--http-port=0',
      '--http-address=127.0.0.1',
      '--grpc-port=0',
      '--grpc-address=127.0.0.1',
      '--metrics-port=0',
      '--metrics-address=127.0.0.1',
      '--log-format=json',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let logs = '';
  let stopped = false;
  child.stdout.on('data', (d: Buffer) => (logs += d));
  child.stderr.on('data', (d: Buffer) => {
    logs += d;
    // The ready report comes after the signal handlers are installed (a SIGTERM before them would kill it).
    // Once: a second SIGTERM would kill it outright (nereid's handler is a once).
    if (!stopped && /"msg":"nereid \S+ ready"/.test(logs)) stopped = child.kill('SIGTERM');
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { logs, code };
}

describe("Triton's tritonserver flags", () => {
  it('accepts every flag of Triton 2.x by name', () => {
    for (const name of TRITON_2X_FLAGS) {
      if (name === 'help') continue;
      assert.ok(name in FLAGS || Object.values(FLAGS).some((s) => 'alias' in s && s.alias === name), `--${name}`);
    }
  });

  it('starts on the command lines of Triton docs, unchanged, and says once which flags have no effect', async () => {
    const args = [...DOCUMENTED.join(' ').split(' '), ...NAMED, `--model-repository=${EXAMPLES}`];
    parseFlags(args);
    const { logs, code } = await serveOnce(args);
    assert.equal(code, 0, logs);
    const noEffect = [...logs.matchAll(/--([a-z0-9-]+) has no effect in Nereid: /g)].map((m) => m[1]);
    const want = [
      'host-policy',
      'cuda-memory-pool-byte-size',
      'backend-directory',
      'repoagent-directory',
      'buffer-manager-thread-count',
      'model-namespacing',
      'cache-directory',
      'min-supported-compute-capability',
    ];
    assert.deepEqual([...noEffect].sort(), [...want].sort(), 'one line per flag with no effect, and only those');
  });

  it('BAD CALL - a value of the wrong kind is refused as for any flag', () => {
    assert.throws(() => parseFlags(['--model-load-thread-count=four']), /expects an integer, got 'four'/);
    assert.throws(() => parseFlags(['--cuda-memory-pool-byte-size=64MB']), /expects <gpu>:<bytes>, got '64MB'/);
    // --rate-limit and --rate-limit-resource: Triton's own messages, src/cli/rate-limit-flags.test.ts
    assert.throws(() => parseFlags(['--host-policy=gpu_0,numa=0']), /expects <name>,numa-node=<id>/);
    assert.throws(() => parseFlags(['--model-load-gpu-limit=0:1.5']), /expects <gpu>:<fraction from 0 to 1>/);
  });
});

describe('--model-load-thread-count and --model-config-name', () => {
  const dirs: string[] = [];
  after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  /** Identity models whose instances take a while to create, so that loads would overlap without a bound. */
  async function slowModels(n: number): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-load-threads-'));
    dirs.push(dir);
    for (let i = 0; i < n; i++) {
      await mkdir(join(dir, `m${i}`, '1'), { recursive: true });
      await writeFile(
        join(dir, `m${i}`, 'config.pbtxt'),
        `backend: "identity"\nmax_batch_size: 0\ninput [{ name: "I" data_type: TYPE_FP32 dims: [1] }]\n` +
          `output [{ name: "O" data_type: TYPE_FP32 dims: [1] }]\ninstance_group [{ kind: KIND_CPU count: 1 }]\n` +
          `parameters { key: "creation_delay_sec" value { string_value: "0.2" } }\n`,
      );
    }
    return dir;
  }

  /** The most loads in progress at once, from the order of the server's load begin/end lines. */
  async function peakLoads(limit: number, models: number): Promise<number> {
    const events: string[] = [];
    const logger = createLogger({
      write: (l) => {
        const load = (JSON.parse(l) as { load?: string }).load;
        if (load !== undefined) events.push(load);
      },
    });
    const srv = await startNereid({ repositories: [await slowModels(models)], modelLoadThreadCount: limit, logger });
    await srv.close();
    let now = 0;
    let peak = 0;
    for (const e of events) {
      now += e === 'begin' ? 1 : -1;
      peak = Math.max(peak, now);
    }
    assert.equal(events.filter((e) => e === 'begin').length, models);
    return peak;
  }

  it('bounds the models loading at once', async () => {
    assert.equal(await peakLoads(1, 3), 1);
    assert.ok((await peakLoads(2, 4)) <= 2);
  });

  it('--model-load-retry-count: a failed load is tried again that many times, then reported', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-load-retry-'));
    dirs.push(dir);
    await mkdir(join(dir, 'broken', '1'), { recursive: true });
    await writeFile(
      join(dir, 'broken', 'config.pbtxt'),
      `backend: "identity"\nmax_batch_size: 0\ninput [{ name: "I" data_type: TYPE_FP32 dims: [1] }]\n` +
        `output [{ name: "O" data_type: TYPE_FP32 dims: [1] }]\ninstance_group [{ kind: KIND_CPU count: 1 }]\n` +
        `parameters { key: "creation_delay_sec" value { string_value: "-1" } }\n`,
    );
    const logs: string[] = [];
    const srv = await startNereid({
      repositories: [dir],
      modelLoadRetryCount: 2,
      exitOnError: false,
      strictReadiness: false,
      logger: createLogger({ write: (l) => logs.push(l) }),
    });
    await srv.close();
    assert.equal(logs.filter((l) => l.includes('"load":"begin"')).length, 3, 'the load and 2 retries');
    assert.equal(logs.filter((l) => l.includes("retrying the load of model 'broken'")).length, 2);
  });

  it("reads configs/<name>.pbtxt where a model has one, else config.pbtxt (Triton's rule)", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-config-name-'));
    dirs.push(dir);
    await cp(join(EXAMPLES, 'simple'), join(dir, 'simple'), { recursive: true });
    await cp(join(EXAMPLES, 'simple'), join(dir, 'other'), { recursive: true });
    await rm(join(dir, 'other', 'config.pbtxt'));
    await mkdir(join(dir, 'simple', 'configs'));
    await writeFile(
      join(dir, 'simple', 'configs', 'h100.pbtxt'),
      'platform: "onnxruntime_onnx"\nmax_batch_size: 3\ninstance_group [{ kind: KIND_CPU count: 1 }]\n',
    );
    const srv = await startNereid({ repositories: [dir], modelConfigName: 'h100', allowGrpc: false });
    try {
      const cfg = async (m: string) =>
        (await (await fetch(`${srv.url}/v2/models/${m}/config`)).json()) as { max_batch_size: number };
      assert.equal((await cfg('simple')).max_batch_size, 3);
      assert.equal((await cfg('other')).max_batch_size, 4, 'no configs/h100.pbtxt: auto-completed as before');
    } finally {
      await srv.close();
    }
  });
});

describe('--http-header-forward-pattern', () => {
  it("forwards matching headers as request parameters (Triton's), the body's own parameters winning", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-forward-'));
    await cp(join(FIXTURES, 'echo_meta'), join(dir, 'echo_meta'), { recursive: true });
    const srv = await startNereid({ repositories: [dir], httpHeaderForwardPattern: 'x-tenant.*', allowGrpc: false });
    try {
      const res = await fetch(`${srv.url}/v2/models/echo_meta/infer`, {
        method: 'POST',
        headers: { 'X-Tenant-Id': 'acme', 'X-Tenant-Zone': 'header', 'X-Other': 'no', priority: '9' },
        body: JSON.stringify({
          parameters: { 'x-tenant-zone': 'body' },
          inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [1], data: ['t'] }],
        }),
      });
      const body = (await res.json()) as { error?: string; outputs: { name: string; data: string[] }[] };
      assert.equal(res.status, 200, body.error);
      const meta = JSON.parse(body.outputs.find((o) => o.name === 'META')?.data[0] ?? '{}') as {
        params: Record<string, unknown>;
      };
      assert.equal(meta.params['x-tenant-id'], 'acme');
      assert.equal(meta.params['x-tenant-zone'], 'body');
      assert.equal(meta.params['x-other'], undefined);
    } finally {
      await srv.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('--grpc-header-forward-pattern forwards matching metadata of ModelInfer the same way', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-forward-grpc-'));
    await cp(join(FIXTURES, 'echo_meta'), join(dir, 'echo_meta'), { recursive: true });
    const srv = await startNereid({ repositories: [dir], grpcHeaderForwardPattern: 'x-tenant-.*' });
    const client = inferenceClient(`127.0.0.1:${srv.grpcPort}`);
    try {
      const md = new grpc.Metadata();
      md.set('x-tenant-id', 'acme');
      md.set('x-other', 'no');
      const text = Buffer.from('t');
      const lengthed = Buffer.concat([Buffer.from([text.length, 0, 0, 0]), text]);
      const resp = await callUnary<{ outputs: { name: string }[]; raw_output_contents: Buffer[] }>(
        client,
        'ModelInfer',
        {
          model_name: 'echo_meta',
          inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [1] }],
          raw_input_contents: [lengthed],
        },
        {},
        md,
      );
      const raw = resp.raw_output_contents[resp.outputs.findIndex((o) => o.name === 'META')];
      const meta = JSON.parse(raw.subarray(4).toString()) as { params: Record<string, unknown> };
      assert.equal(meta.params['x-tenant-id'], 'acme');
      assert.equal(meta.params['x-other'], undefined);
    } finally {
      client.close();
      await srv.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('BAD CALL - a pattern that is not a regular expression fails start-up naming the flag', async () => {
    await assert.rejects(
      startNereid({ repositories: [EXAMPLES], httpHeaderForwardPattern: 'x-(' }),
      /--http-header-forward-pattern 'x-\(' is not a regular expression/,
    );
  });
});
