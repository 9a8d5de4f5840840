import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { loadNvmlApi } from '../../src/native/nvml-koffi.js';
import { buildProviderDoubles, wheelMembers, writeZip, type ProviderDoubles } from '../helpers/gpu-wheel.js';
import { buildNvmlLibraryDouble } from '../helpers/nvml-double.js';
import { OFFLINE_ENV } from '../helpers/offline.js';
import { EXAMPLES } from '../helpers/server.js';
import { startServerProcess } from '../hardening/server-process.js';

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const ORT_VERSION = (
  JSON.parse(readFileSync(createRequire(import.meta.url).resolve('onnxruntime-node/package.json'), 'utf8')) as {
    version: string;
  }
).version;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI with `env` added; NVML is pointed at a file that does not exist unless the test says otherwise.
 * Offline: `gpu setup` without --wheel runs pip, which must fail at once here, never download.
 */
async function nereid(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...OFFLINE_ENV, ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d));
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

const root = mkdtempSync(join(tmpdir(), 'nereid-gpu-cli-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
/** A fresh empty folder standing in for onnxruntime-node's native folder. */
const freshTarget = (): string => {
  const d = join(root, `target-${n++}`);
  mkdirSync(d);
  return d;
};

describe('nereid gpu check', () => {
  it('on this machine without an NVIDIA driver: says so and exits 1', async (t) => {
    if ('init' in (await loadNvmlApi())) return t.skip('this machine has an NVIDIA driver');
    const r = await nereid(['gpu', 'check'], { NEREID_ORT_LIB_DIR: freshTarget() });
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^no NVIDIA driver: libnvidia-ml\.so\.1 not found$/m);
    assert.match(r.stdout, /CUDA provider: not installed/);
    assert.match(
      r.stdout,
      /missing:\n {2}- no NVIDIA driver: libnvidia-ml\.so\.1 not found\n {2}- .*libonnxruntime\.so\.1 is missing.*\n {2}- the CUDA provider is not installed: run 'nereid gpu setup'\n$/,
    );
    assert.equal(r.stderr.replace(/npm warn.*\n/g, ''), '');
  });

  it('reports driver and GPUs through the koffi binding over a C test double of NVML', async (t) => {
    const lib = buildNvmlLibraryDouble(mkdtempSync(join(root, 'nvml-')));
    if (!lib) return t.skip('no C compiler');
    const r = await nereid(['gpu', 'check', '--target', freshTarget()], {
      NEREID_NVML_LIBRARY: lib,
      CUDA_VISIBLE_DEVICES: '1',
    });
    assert.equal(r.code, 1, 'no provider installed yet');
    assert.match(r.stdout, /^driver: 580\.65\.06, CUDA 13\.0$/m);
    assert.match(r.stdout, /^GPUs: 2 \(1 hidden by CUDA_VISIBLE_DEVICES\)$/m);
    assert.match(
      r.stdout,
      /GPU 0: NVIDIA H200 \(test double\) GPU-d0b1e000-0000-0000-0000-000000000000 \[not visible to CUDA\]/,
    );
    assert.match(r.stdout, /memory 0\.0 \/ 140\.4 GiB, utilization 42 %, power 123 W \/ 700 W/);
    assert.match(
      r.stdout,
      /GPU 1: .*000000000001\n {4}memory 0\.0 \/ 140\.4 GiB, utilization 0 %, power n\/a \/ 700 W/,
    );
    assert.doesNotMatch(r.stdout, /no NVIDIA driver/);
  });

  it('BAD CALL - an unknown option exits 2', async () => {
    const r = await nereid(['gpu', 'check', '--wheel', 'x.whl']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown option '--wheel' for 'gpu check'/);
  });
});

describe('nereid gpu setup --wheel (a test double of the onnxruntime-gpu wheel)', () => {
  let doubles: ProviderDoubles | undefined;
  let wheel: string;
  before(() => {
    doubles = buildProviderDoubles(join(root, 'providers'));
    wheel = join(root, `onnxruntime_gpu-${ORT_VERSION}-cp312-cp312-manylinux_2_28_x86_64.whl`);
    const libs: Record<string, Buffer> = doubles
      ? {
          'libonnxruntime_providers_shared.so': readFileSync(doubles.shared),
          'libonnxruntime_providers_cuda.so': readFileSync(doubles.cuda),
          'libonnxruntime_providers_tensorrt.so': readFileSync(doubles.tensorrt),
        }
      : {
          'libonnxruntime_providers_shared.so': Buffer.from('not ELF: shared'),
          'libonnxruntime_providers_cuda.so': Buffer.from('not ELF: cuda'),
        };
    writeZip(wheel, wheelMembers(ORT_VERSION, libs));
  });

  it('installs the provider libraries into the target, byte for byte and executable, then lists what is missing', async () => {
    const target = freshTarget();
    const r = await nereid(['gpu', 'setup', '--wheel', wheel, '--target', target, '--python', '/nonexistent/python']);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    for (const f of ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so']) {
      assert.match(r.stdout, new RegExp(`installed ${f.replace(/\./g, '\\.')} \\(`));
      assert.equal(statSync(join(target, f)).mode & 0o777, 0o755);
    }
    assert.deepEqual(
      readdirSync(target).filter((f) => f.includes('partial')),
      [],
      'no partial file is left',
    );
    if (!doubles) {
      assert.match(r.stdout, /CUDA provider: cannot be loaded: .*not a dynamic executable/);
      return;
    }
    assert.deepEqual(readFileSync(join(target, 'libonnxruntime_providers_cuda.so')), readFileSync(doubles.cuda));
    assert.match(r.stdout, /CUDA provider: 2 libraries missing:/);
    assert.match(r.stdout, /libcudnn\.so\.9 +cuDNN 9 for CUDA 13 \(pip: nvidia-cudnn-cu13==9\.\*\)/);
    assert.match(r.stdout, /libcublas\.so\.13 +cuBLAS for CUDA 13 \(pip: nvidia-cublas==13\.\*\)/);
    assert.match(
      r.stdout,
      /fix: \/nonexistent\/python -m pip install 'nvidia-cudnn-cu13==9\.\*' 'nvidia-cublas==13\.\*'/,
    );
    assert.match(r.stdout, /TensorRT provider \(optional\): 1 library missing:\n {2}libnvinfer\.so\.10 +TensorRT 10/);
  });

  it('finds the missing CUDA libraries in a Python’s site-packages and prints an LD_LIBRARY_PATH it has checked', async (t) => {
    if (!doubles) return t.skip('no C compiler');
    const r = await nereid(['gpu', 'setup', '--wheel', wheel, '--target', freshTarget(), '--python', 'python3'], {
      PYTHONPATH: join(root, 'providers', 'site-packages'),
    });
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /found in python3's site-packages/);
    assert.ok(
      r.stdout.includes(`export LD_LIBRARY_PATH=${doubles.cudaLibDir}\${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}`),
      r.stdout,
    );
  });

  it('exits 0 when every library the CUDA provider needs resolves (and a real load succeeds)', async (t) => {
    if (!doubles) return t.skip('no C compiler');
    const target = freshTarget();
    const env = { LD_LIBRARY_PATH: doubles.cudaLibDir };
    const r = await nereid(['gpu', 'setup', '--wheel', wheel, '--target', target], env);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /CUDA provider: ready/);
    // check agrees about the libraries, and still exits 1 here for want of a driver.
    const c = await nereid(['gpu', 'check', '--target', target], {
      ...env,
      NEREID_NVML_LIBRARY: '/nonexistent/libnvidia-ml.so.1',
    });
    assert.equal(c.code, 1);
    assert.match(c.stdout, /CUDA provider: ready/);
    assert.match(c.stdout, /libonnxruntime_providers_cuda\.so +present/);
  });

  it('replaces an installed library by a new file, never by writing into the old one', async (t) => {
    if (!doubles) return t.skip('no C compiler');
    const target = freshTarget();
    const old = join(target, 'libonnxruntime_providers_cuda.so');
    writeFileSync(old, 'old library');
    const inode = statSync(old).ino;
    await nereid(['gpu', 'setup', '--wheel', wheel, '--target', target]);
    assert.notEqual(statSync(old).ino, inode);
  });

  it('BAD CALL - a wheel path that does not exist exits 2 naming it', async () => {
    const r = await nereid(['gpu', 'setup', '--wheel', join(root, 'nope.whl'), '--target', freshTarget()]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--wheel '.*nope\.whl': no such file/);
  });

  it('BAD CALL - a wheel without the provider libraries exits 1 naming the members it lacks', async () => {
    const w = join(root, 'cpu-only.whl');
    writeZip(w, wheelMembers(ORT_VERSION, { 'onnxruntime_pybind11_state.so': Buffer.from('x') }));
    const target = freshTarget();
    const r = await nereid(['gpu', 'setup', '--wheel', w, '--target', target]);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      /lacks onnxruntime\/capi\/libonnxruntime_providers_shared\.so and onnxruntime\/capi\/libonnxruntime_providers_cuda\.so/,
    );
    assert.deepEqual(readdirSync(target), []);
  });

  it('BAD CALL - a wheel of another onnxruntime version is refused', async () => {
    const w = join(root, 'old.whl');
    writeZip(
      w,
      wheelMembers('1.19.2', {
        'libonnxruntime_providers_shared.so': Buffer.from('x'),
        'libonnxruntime_providers_cuda.so': Buffer.from('y'),
      }),
    );
    const r = await nereid(['gpu', 'setup', '--wheel', w, '--target', freshTarget()]);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      new RegExp(`is onnxruntime-gpu 1\\.19\\.2 but onnxruntime-node is ${ORT_VERSION.replace(/\./g, '\\.')}`),
    );
  });

  it('BAD CALL - another package’s wheel, a file that is not a zip, and a corrupt member are refused', async () => {
    const other = join(root, 'numpy.whl');
    writeZip(other, [{ name: 'numpy-2.0.0.dist-info/METADATA', data: Buffer.from('Name: numpy\n') }]);
    const notZip = join(root, 'notzip.whl');
    writeFileSync(notZip, 'this is not a zip archive at all');
    const corrupt = join(root, 'corrupt.whl');
    writeZip(
      corrupt,
      wheelMembers(ORT_VERSION, {
        'libonnxruntime_providers_shared.so': Buffer.from('a'),
        'libonnxruntime_providers_cuda.so': Buffer.alloc(4096, 7),
      }),
      'onnxruntime/capi/libonnxruntime_providers_cuda.so',
    );
    const target = freshTarget();
    const cases: [string, RegExp][] = [
      [other, /is not an onnxruntime-gpu wheel \(it is numpy 2\.0\.0\)/],
      [notZip, /is not a readable wheel \(zip\): no end-of-central-directory record/],
      [corrupt, /member 'onnxruntime\/capi\/libonnxruntime_providers_cuda\.so' is corrupt/],
    ];
    for (const [w, message] of cases) {
      const r = await nereid(['gpu', 'setup', '--wheel', w, '--target', target]);
      assert.equal(r.code, 1, w);
      assert.match(r.stderr, message);
    }
    assert.ok(!readdirSync(target).includes('libonnxruntime_providers_cuda.so'), 'a corrupt member is never installed');
    assert.deepEqual(
      readdirSync(target).filter((f) => f.includes('partial')),
      [],
    );
  });

  it('BAD CALL - a target folder that does not exist exits 2', async () => {
    const r = await nereid(['gpu', 'setup', '--wheel', wheel, '--target', join(root, 'no-such-dir')]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /target folder '.*no-such-dir' does not exist/);
  });
});

describe('nereid gpu setup with pip (a test double of Python and pip)', () => {
  /** A stand-in `python` that answers `-m pip download` by copying `wheel` into --dest and logging its arguments. */
  const fakePython = (name: string, wheel: string | undefined, log: string): string => {
    const p = join(root, name);
    writeFileSync(
      p,
      `#!/bin/sh
if [ "$1" = "-c" ]; then case "$2" in *getsitepackages*) echo '{}';; esac; exit 0; fi
echo "$@" > '${log}'
[ "$1 $2 $3" = "-m pip download" ] || exit 9
echo "Collecting onnxruntime-gpu==${ORT_VERSION}"
${
  wheel
    ? `while [ $# -gt 0 ]; do if [ "$1" = "--dest" ]; then mkdir -p "$2"; cp '${wheel}' "$2/"; fi; shift; done
echo "Saved the wheel"; exit 0`
    : `echo "ERROR: No matching distribution found for onnxruntime-gpu==${ORT_VERSION}" >&2; exit 1`
}
`,
    );
    chmodSync(p, 0o755);
    return p;
  };

  it('downloads onnxruntime-gpu of onnxruntime-node’s version for this platform, showing pip’s lines', async () => {
    const wheel = join(root, `onnxruntime_gpu-${ORT_VERSION}-cp312-cp312-manylinux_2_28_x86_64.whl`);
    writeZip(
      wheel,
      wheelMembers(ORT_VERSION, {
        'libonnxruntime_providers_shared.so': Buffer.from('s'),
        'libonnxruntime_providers_cuda.so': Buffer.from('c'),
      }),
    );
    const log = join(root, 'pip-args.txt');
    const target = freshTarget();
    const r = await nereid(['gpu', 'setup', '--python', fakePython('python-ok', wheel, log), '--target', target]);
    const args = await readFile(log, 'utf8');
    assert.match(args, /^-m pip download --no-deps --only-binary=:all: /);
    assert.match(args, new RegExp(`--platform manylinux_2_28_${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}`));
    assert.match(args, new RegExp(`onnxruntime-gpu==${ORT_VERSION.replace(/\./g, '\\.')}\\n$`));
    assert.match(r.stdout, /downloading onnxruntime-gpu==.* with .*python-ok's pip/);
    assert.match(r.stdout, new RegExp(`pip: Collecting onnxruntime-gpu==${ORT_VERSION.replace(/\./g, '\\.')}`));
    assert.match(r.stdout, /downloaded onnxruntime_gpu-.*\.whl/);
    assert.match(r.stdout, /installed libonnxruntime_providers_cuda\.so/);
    assert.equal(readFileSync(join(target, 'libonnxruntime_providers_cuda.so'), 'utf8'), 'c');
    assert.equal(r.code, 1, 'the stand-in libraries are not loadable');
  });

  it('BAD CALL - pip finding no wheel exits 1 with what to do', async () => {
    const r = await nereid([
      'gpu',
      'setup',
      '--python',
      fakePython('python-none', undefined, join(root, 'log2')),
      '--target',
      freshTarget(),
    ]);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /pip: ERROR: No matching distribution found/);
    assert.match(r.stderr, /download failed: pip found no onnxruntime-gpu==.* wheel .* pass --wheel <path>/);
  });

  it('BAD CALL - a Python that does not exist exits 1 naming it', async () => {
    const r = await nereid(['gpu', 'setup', '--python', '/nonexistent/python3', '--target', freshTarget()]);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      /'\/nonexistent\/python3' was not found: pass --python <python with pip>, or --wheel <path>/,
    );
  });
});

describe('nereid serve --allow-gpu-metrics', () => {
  /** Starts serve, scrapes /metrics once, stops it. */
  async function scrape(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
    const server = await startServerProcess(['--model-repository', EXAMPLES, ...args], [], {
      env: { ...process.env, ...env },
      metrics: true,
    });
    try {
      return await (await fetch(`${server.metricsUrl}/metrics`)).text();
    } finally {
      await server.stop();
    }
  }

  it('serves nv_gpu_* from NVML (C test double) and none with --allow-gpu-metrics=false', async (t) => {
    const lib = buildNvmlLibraryDouble(mkdtempSync(join(root, 'nvml-serve-')));
    if (!lib) return t.skip('no C compiler');
    const on = await scrape([], { NEREID_NVML_LIBRARY: lib });
    assert.match(on, /^nv_gpu_utilization\{gpu_uuid="GPU-d0b1e000-0000-0000-0000-000000000000"\} 0\.42$/m);
    assert.match(on, /^nv_gpu_power_limit\{gpu_uuid="GPU-d0b1e000-0000-0000-0000-000000000001"\} 700$/m);
    const off = await scrape(['--allow-gpu-metrics=false'], { NEREID_NVML_LIBRARY: lib });
    assert.doesNotMatch(off, /nv_gpu_|nv_energy_consumption/);
    assert.match(off, /nv_inference_count/);
  });
});
