import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { OFFLINE_ENV } from '../../test/helpers/offline.js';
import { DOUBLE, MAGIC, PYTHON, addSubPlan } from '../../test/helpers/tensorrt.js';
import { checkTensorRT, fallbackPlan, runTensorRTCommand, sha1Mismatch } from './tensorrt-setup.js';

// `nereid tensorrt setup/check` with the TEST DOUBLE of TensorRT standing in for an installed TensorRT (on
// PYTHONPATH). Installing NVIDIA's wheels or the Maven Central fallback needs the network and is exercised by
// scripts/gpu/tensorrt-on-device.sh (offline, from carried files). Here `setup` must find the double: were it not to
// import, setup would go on to pip (NVIDIA's index) and curl (Maven Central). So the double is checked first, and
// failing that every test fails at once saying why; and pip and curl run offline (OFFLINE_ENV), failing at once.

const python = PYTHON;
const home = mkdtempSync(join(tmpdir(), 'nereid-trt-home-'));
after(() => rmSync(home, { recursive: true, force: true }));
const saved = { ...process.env };
let doubleImports: string | undefined;
before(async () => {
  process.env.PYTHONPATH = DOUBLE;
  const r = await checkTensorRT(python, undefined);
  if (saved.PYTHONPATH === undefined) delete process.env.PYTHONPATH;
  else process.env.PYTHONPATH = saved.PYTHONPATH;
  if (r.tensorrt === undefined) doubleImports = `${python}: ${r.import_error ?? 'unknown reason'}`;
});
beforeEach(() => {
  assert.equal(
    doubleImports,
    undefined,
    `the TensorRT test double (${DOUBLE}) does not import, so setup would try to install TensorRT: ${doubleImports}`,
  );
  Object.assign(process.env, OFFLINE_ENV);
  process.env.NEREID_TENSORRT_HOME = home;
  process.env.PYTHONPATH = DOUBLE;
});
afterEach(() => {
  for (const k of [
    'NEREID_TENSORRT_HOME',
    'PYTHONPATH',
    'NEREID_CUDA_DOUBLE_GPUS',
    'NEREID_TRT_DOUBLE_VERSION',
    'NEREID_TRT_DOUBLE_BUILDER',
    ...Object.keys(OFFLINE_ENV),
  ]) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
});

async function cli(args: string[]): Promise<{ code: number; out: string; err: string; all: string }> {
  let out = '';
  let err = '';
  let all = '';
  const code = await runTensorRTCommand(args, {
    out: (s) => ((out += s), (all += s)),
    err: (s) => ((err += s), (all += s)),
  });
  return { code, out, err, all };
}

describe('nereid tensorrt setup / check', () => {
  it('setup finds an installed TensorRT, records it, and checks import, GPUs and a runtime', async () => {
    const r = await cli(['setup', '--python', python, '--home', home]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /found TensorRT 11\.2\.1\.2 in/);
    assert.match(r.out, /TensorRT 11\.2\.1\.2 \(full runtime\) imports\nGPUs: 0: Test Double GPU/);
    assert.match(r.out, /TensorRT runtime created on GPU 0/);
    assert.equal(JSON.parse(readFileSync(join(home, 'env.json'), 'utf8')).python, python);
  });

  it("check deserializes a plan, and reports TensorRT's message for one that is not", async () => {
    await cli(['setup', '--python', python, '--home', home]);
    const good = join(home, 'good.plan');
    writeFileSync(good, Buffer.concat([Buffer.from(MAGIC), Buffer.from(JSON.stringify(addSubPlan()))]));
    const ok = await cli(['check', '--plan', good]);
    assert.equal(ok.code, 0, ok.err);
    assert.match(ok.out, /plan: deserialized: 4 I\/O tensors, 2 profile\(s\)/);
    const bad = join(home, 'bad.plan');
    writeFileSync(bad, 'random bytes');
    const no = await cli(['check', '--plan', bad]);
    assert.equal(no.code, 1);
    assert.match(no.err, /plan: TensorRT 11\.2\.1\.2 cannot deserialize plan .*Serialization/);
  });

  it('check builds a tiny plan on GPU 0 and runs it (the answer checked), with TensorRT 10 and 11', async () => {
    for (const v of ['11.2.1.2', '10.6.0']) {
      process.env.NEREID_TRT_DOUBLE_VERSION = v;
      await cli(['setup', '--python', python, '--home', home]);
      const r = await cli(['check']);
      assert.equal(r.code, 0, r.err);
      assert.match(r.out, new RegExp(`TensorRT ${v.replace(/\./g, '\\.')} \\(full runtime\\) imports`));
      assert.match(
        r.out,
        /builder on GPU 0: works, built a \d+-byte plan \(y = x \+ x\) in [\d.]+ s and ran it: the answer is right/,
      );
    }
  });

  it("NO BUILDER - a TensorRT that imports and runs plans but cannot build on this GPU: TensorRT's reason (exit 1)", async () => {
    await cli(['setup', '--python', python, '--home', home]);
    process.env.NEREID_TRT_DOUBLE_BUILDER = 'missing-resource';
    const r = await cli(['check']);
    assert.equal(r.code, 1);
    assert.match(r.out, /TensorRT runtime created on GPU 0/);
    assert.match(r.err, /builder on GPU 0: Unable to load library: libnvinfer_builder_resource_sm90/);
  });

  it('the fallback: 10.6 from Maven Central with the CUDA 12 bindings, later versions with CUDA 13; unknown versions none', () => {
    const p = fallbackPlan('10.6.0');
    assert.equal(
      p?.url,
      'https://repo1.maven.org/maven2/org/bytedeco/tensorrt/10.6-1.5.11/tensorrt-10.6-1.5.11-linux-x86_64-redist.jar',
    );
    assert.deepEqual(p?.packages, ['tensorrt-cu12-bindings==10.6.0', 'cuda-bindings>=12.6,<13', 'numpy']);
    assert.equal(fallbackPlan('11.2.1.2')?.packages[0], 'tensorrt-cu13-bindings==11.2.1.2');
    assert.equal(fallbackPlan('9.3.0'), undefined);
  });

  it("BAD DOWNLOAD - a file whose SHA-1 is not Maven Central's is named; a published value that is no SHA-1 too", async () => {
    const f = join(home, 'x.jar');
    writeFileSync(f, 'abc');
    assert.equal(await sha1Mismatch(f, 'a9993e364706816aba3e25717850c26c9cd0d89d  x.jar\n'), undefined);
    assert.match(
      (await sha1Mismatch(f, '0000000000000000000000000000000000000000')) ?? '',
      /SHA-1 of .*x\.jar is a9993e364706816aba3e25717850c26c9cd0d89d, Maven Central publishes 0{40}/,
    );
    assert.match((await sha1Mismatch(f, '<html>404</html>')) ?? '', /is not a SHA-1/);
  });

  it('NO GPU - check says what CUDA says (exit 1)', async () => {
    await cli(['setup', '--python', python, '--home', home]);
    process.env.NEREID_CUDA_DOUBLE_GPUS = '0';
    const r = await cli(['check']);
    assert.equal(r.code, 1);
    assert.match(r.err, /CUDA: cudaGetDeviceCount failed: cudaErrorNoDevice/);
    // The missing GPU is said first: before what TensorRT can do, which matters only where there is one.
    assert.ok(r.all.indexOf('CUDA:') < r.all.indexOf('TensorRT '), r.all);
  });

  it('BAD USAGE - unknown sub-commands and options', async () => {
    assert.equal((await cli(['install'])).code, 2);
    const r = await cli(['setup', '--versions', '11']);
    assert.equal(r.code, 2);
    assert.match(r.err, /unexpected argument '--versions'/);
  });
});
