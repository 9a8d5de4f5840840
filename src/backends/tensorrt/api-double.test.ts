import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ROOT } from '../runtime/process/python-env.js';
import { PYTHON } from '../../../test/helpers/tensorrt.js';

// The TEST DOUBLE of TensorRT and CUDA (test/fixtures/tensorrt/double) must offer nothing the real APIs lack:
// compared with fixtures dumped from the real TensorRT 10.6 and 11.2 bindings and cuda-bindings 12.9 and 13
// (scripts/tensorrt/dump_api.py; the bindings import without a GPU, so they were dumped on this machine; on the
// H200, scripts/gpu/tensorrt-on-device.sh dumps them again and diffs). NEREID_TRT_DOUBLE_VERSION picks the surface.

const python = PYTHON;
const fixtures = join(ROOT, 'test/fixtures/tensorrt');
const env = { ...process.env, PYTHONPATH: join(fixtures, 'double') };

describe('TensorRT test double', () => {
  for (const [version, cuda] of [
    ['11.2.1.2', '13'],
    ['10.6.0', '12'],
  ] as const) {
    it(`as TensorRT ${version}: offers only names, members and parameters the real ${version} and cuda-bindings ${cuda} APIs have`, () => {
      const api = join(fixtures, `api-${version.split('.').slice(0, 2).join('.')}.json`);
      const r = spawnSync(
        python,
        [
          join(ROOT, 'scripts/tensorrt/check_double.py'),
          `tensorrt=${api}`,
          `tensorrt_lean=${api}`,
          `cuda.bindings.runtime=${join(fixtures, `cuda-runtime-api-${cuda}.json`)}`,
        ],
        { env: { ...env, NEREID_TRT_DOUBLE_VERSION: version }, encoding: 'utf8' },
      );
      assert.equal(r.stdout + r.stderr, '', 'the double offers what the real API lacks');
      assert.equal(r.status, 0);
    });
  }

  it('the 10.6 and 11.2 surfaces differ where Nereid must handle both (builder precision flags)', () => {
    const members = (v: string, n: string): string[] =>
      (
        JSON.parse(readFileSync(join(fixtures, `api-${v}.json`), 'utf8')) as {
          names: Record<string, { members?: Record<string, unknown> | string[] }>;
        }
      ).names[n]?.members as unknown as string[];
    assert.ok(members('10.6', 'BuilderFlag').includes('FP16'));
    assert.ok(!members('11.2', 'BuilderFlag').includes('FP16'));
    assert.ok(members('10.6', 'NetworkDefinitionCreationFlag').includes('EXPLICIT_BATCH'));
  });

  it('the checker catches a name the real API lacks (it is not vacuous)', () => {
    const real = JSON.parse(readFileSync(join(fixtures, 'api-11.2.json'), 'utf8')) as {
      names: Record<string, { members?: Record<string, unknown> }>;
    };
    assert.ok(real.names.IExecutionContext?.members?.execute_async_v3, 'the fixture is the real 11.2 surface');
    assert.equal(real.names.BuilderFlag?.members && 'FP16' in real.names.BuilderFlag.members, false);
    const out = execFileSync(
      python,
      [
        '-c',
        [
          'import sys, json',
          `sys.path.insert(0, ${JSON.stringify(join(ROOT, 'scripts/tensorrt'))})`,
          'import check_double, tensorrt',
          'tensorrt.IExecutionContext.execute_async_v4 = lambda self, stream_handle: True',
          `print(json.dumps(check_double.compare("tensorrt", json.load(open(${JSON.stringify(join(fixtures, 'api-11.2.json'))})))))`,
        ].join('\n'),
      ],
      { env, encoding: 'utf8' },
    );
    assert.deepEqual(JSON.parse(out), ['tensorrt.IExecutionContext.execute_async_v4: not in the real class']);
  });
});
