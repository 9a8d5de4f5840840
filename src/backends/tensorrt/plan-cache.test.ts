import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parseModelConfigOrThrow } from '../../config/index.js';
import { InvalidArgError } from '../../core/errors.js';
import { tempDir as makeTemp } from '../../../test/helpers/tensorrt-onnx.js';
import { onnxBuildOptions } from './onnx-plan.js';
import { hashOnnx, PlanCache, planKey, STALE_MS, type PlanKeyParts } from './plan-cache.js';

// The plan cache's pieces on their own: keys, lookup and verification, the lock between builders, and the build
// options a model config gives. Loads through the server: test/integration/tensorrt-onnx.test.ts.

const BASE: PlanKeyParts = {
  onnxSha256: 'a'.repeat(64),
  trtVersion: '10.6.0.26',
  gpu: 'NVIDIA H200 (compute capability 9.0)',
  build: { shapes: { x: { min: [1, 4], opt: [8, 4], max: [8, 4] } }, precision: 'fp32', batch: { opt: 8, max: 8 } },
};

/** An entry as a build leaves it: the plan `bytes` under `key`, recorded for TensorRT 10.6 on an H200. */
async function storeEntry(cache: PlanCache, key: string, bytes = 'PLAN-BYTES'): Promise<void> {
  const tmp = await cache.scratch(key);
  writeFileSync(tmp, bytes);
  await cache.store(key, tmp, {
    trt_version: BASE.trtVersion,
    gpu: BASE.gpu,
    onnx_sha256: BASE.onnxSha256,
    build: {},
    version_compatible: false,
    built_at: new Date().toISOString(),
    build_seconds: 1,
  });
}

const made: string[] = [];
const tempDir = (prefix: string): string => {
  const d = makeTemp(prefix);
  made.push(d);
  return d;
};
after(() => made.forEach((d) => rmSync(d, { recursive: true, force: true })));

const expect = { trtVersion: BASE.trtVersion, gpu: BASE.gpu };

describe('plan cache: keys', () => {
  it('the same parts give the same key, whatever the order of their fields', () => {
    const reordered: PlanKeyParts = {
      build: { batch: { max: 8, opt: 8 }, precision: 'fp32', shapes: BASE.build.shapes },
      gpu: BASE.gpu,
      trtVersion: BASE.trtVersion,
      onnxSha256: BASE.onnxSha256,
    };
    assert.equal(planKey(reordered), planKey(BASE));
    assert.match(planKey(BASE), /^[0-9a-f]{64}$/);
  });

  it('each part changes the key: ONNX bytes, GPU, compute capability, TensorRT version, every build option', () => {
    const variants: PlanKeyParts[] = [
      { ...BASE, onnxSha256: 'b'.repeat(64) },
      { ...BASE, gpu: 'NVIDIA H100 80GB HBM3 (compute capability 9.0)' },
      { ...BASE, gpu: 'NVIDIA H200 (compute capability 10.0)' },
      { ...BASE, trtVersion: '11.2.1.2' },
      { ...BASE, build: { ...BASE.build, precision: 'fp16' } },
      { ...BASE, build: { ...BASE.build, workspace_mib: 1024 } },
      { ...BASE, build: { ...BASE.build, batch: { opt: 4, max: 8 } } },
      { ...BASE, build: { ...BASE.build, shapes: { x: { min: [1, 4], opt: [8, 4], max: [16, 4] } } } },
    ];
    const keys = new Set([planKey(BASE), ...variants.map(planKey)]);
    assert.equal(keys.size, variants.length + 1);
  });

  it('the ONNX hash covers the external data files: a changed weight file changes it', async () => {
    const dir = tempDir('nereid-onnx-hash-');
    writeFileSync(join(dir, 'model.onnx'), 'graph');
    writeFileSync(join(dir, 'weights.bin'), 'w1');
    const before = await hashOnnx(join(dir, 'model.onnx'), ['weights.bin']);
    assert.notEqual(before, await hashOnnx(join(dir, 'model.onnx'), []));
    writeFileSync(join(dir, 'weights.bin'), 'w2');
    assert.notEqual(before, await hashOnnx(join(dir, 'model.onnx'), ['weights.bin']));
  });
});

describe('plan cache: lookup', () => {
  it('a stored entry is a hit; an absent one a plain miss', async () => {
    const cache = new PlanCache(tempDir('nereid-plans-'));
    const key = planKey(BASE);
    assert.deepEqual(await cache.lookup(key, expect), { hit: false });
    await storeEntry(cache, key);
    const hit = await cache.lookup(key, expect);
    assert.equal(hit.hit, true);
    assert.equal(hit.hit && readFileSync(hit.plan, 'utf8'), 'PLAN-BYTES');
    const entry = JSON.parse(readFileSync(join(cache.dir, key, 'entry.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(entry.version_compatible, false);
    assert.match(String(entry.plan_sha256), /^[0-9a-f]{64}$/);
  });

  it('BAD ENTRY - a plan whose bytes no longer match the recorded sha256 is not used', async () => {
    const cache = new PlanCache(tempDir('nereid-plans-'));
    const key = planKey(BASE);
    await storeEntry(cache, key);
    const plan = cache.planPath(key);
    const bytes = readFileSync(plan);
    bytes[3] ^= 0xff;
    writeFileSync(plan, bytes);
    const r = await cache.lookup(key, expect);
    assert.equal(r.hit, false);
    assert.match(!r.hit ? (r.problem ?? '') : '', /plan's sha256 is [0-9a-f]{64}, entry.json records/);
  });

  it('BAD ENTRY - an entry recorded for another TensorRT version or GPU is never used', async () => {
    const cache = new PlanCache(tempDir('nereid-plans-'));
    const key = planKey(BASE);
    await storeEntry(cache, key);
    const other = await cache.lookup(key, { ...expect, trtVersion: '11.2.1.2' });
    assert.match(!other.hit ? (other.problem ?? '') : '', /built by TensorRT 10\.6\.0\.26, this is 11\.2\.1\.2/);
    const gpu = await cache.lookup(key, { ...expect, gpu: 'NVIDIA L4 (compute capability 8.9)' });
    assert.match(!gpu.hit ? (gpu.problem ?? '') : '', /built for NVIDIA H200/);
  });

  it('BAD ENTRY - a plan without its entry.json (a build interrupted before the record) is not used', async () => {
    const cache = new PlanCache(tempDir('nereid-plans-'));
    const key = planKey(BASE);
    mkdirSync(join(cache.dir, key));
    writeFileSync(cache.planPath(key), 'half');
    const r = await cache.lookup(key, expect);
    assert.match(!r.hit ? (r.problem ?? '') : '', /no entry\.json/);
  });
});

describe('plan cache: one builder per key', () => {
  it('a second builder of the same key waits for the first and runs after it', async () => {
    const cache = new PlanCache(tempDir('nereid-plans-'));
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let waited = 0;
    const first = cache.withLock(
      'k',
      async () => {
        order.push('first in');
        await gate;
        order.push('first out');
      },
      {},
    );
    // The first holds the lock before the second asks.
    while (order.length === 0) await new Promise((r) => setImmediate(r));
    const second = cache.withLock('k', () => Promise.resolve(void order.push('second')), { onWait: () => waited++ });
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(order, ['first in'], 'the second waits while the first holds the lock');
    release();
    await Promise.all([first, second]);
    assert.deepEqual(order, ['first in', 'first out', 'second']);
    assert.equal(waited, 1, 'the wait is reported once');
  });

  it('a lock left by a builder that died (its pid gone) is taken over', async () => {
    const cache = new PlanCache(tempDir('nereid-plans-'));
    const dead = spawnSync('true').pid;
    writeFileSync(join(cache.dir, 'k.lock'), JSON.stringify({ pid: dead, host: hostname(), nonce: 'x' }));
    let ran = false;
    await cache.withLock('k', () => Promise.resolve(void (ran = true)), {});
    assert.equal(ran, true);
  });

  it('a lock nobody touched for longer than the stale limit is taken over (a holder on another host)', async () => {
    const cache = new PlanCache(tempDir('nereid-plans-'));
    const lock = join(cache.dir, 'k.lock');
    writeFileSync(lock, JSON.stringify({ pid: 1, host: 'elsewhere', nonce: 'y' }));
    const old = new Date(Date.now() - STALE_MS - 5_000);
    utimesSync(lock, old, old);
    let ran = false;
    await cache.withLock('k', () => Promise.resolve(void (ran = true)), {});
    assert.equal(ran, true);
  });

  it('a waiter whose load is cancelled stops waiting with CANCELLED', async () => {
    const cache = new PlanCache(tempDir('nereid-plans-'));
    writeFileSync(join(cache.dir, 'k.lock'), JSON.stringify({ pid: process.pid, host: hostname(), nonce: 'z' }));
    const ac = new AbortController();
    const waiting = cache.withLock('k', () => Promise.resolve(), { signal: ac.signal });
    setTimeout(() => ac.abort(), 100);
    await assert.rejects(waiting, (e: Error & { code?: string }) => e.code === 'CANCELLED');
  });
});

describe('ONNX build options from the model config', () => {
  const cfg = (text: string) => parseModelConfigOrThrow(text, 'config.pbtxt');
  const io = 'input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]';

  it('profiles from max_batch_size and the dims; precision and workspace from parameters', () => {
    const o = onnxBuildOptions(
      cfg(
        `max_batch_size: 8 ${io} parameters [{ key: "precision" value { string_value: "fp16" } }, { key: "workspace_mib" value { string_value: "512" } }]`,
      ),
      "model 'm'",
    );
    assert.deepEqual(o, {
      shapes: { x: { min: [1, 4], opt: [8, 4], max: [8, 4] } },
      precision: 'fp16',
      workspace_mib: 512,
      batch: { opt: 8, max: 8 },
    });
  });

  it('min_shapes/opt_shapes/max_shapes give an input its range (dynamic sequence length)', () => {
    const o = onnxBuildOptions(
      cfg(
        'max_batch_size: 8 input [{ name: "ids" data_type: TYPE_INT64 dims: [-1] }] parameters [{ key: "min_shapes" value { string_value: "ids:1x1" } }, { key: "opt_shapes" value { string_value: "ids:8x128" } }, { key: "max_shapes" value { string_value: "ids:8x512" } }]',
      ),
      "model 'm'",
    );
    assert.deepEqual(o.shapes, { ids: { min: [1, 1], opt: [8, 128], max: [8, 512] } });
  });

  it('BAD CONFIG - a dynamic dim with no shapes given names the parameters to set', () => {
    assert.throws(
      () =>
        onnxBuildOptions(
          cfg('max_batch_size: 8 input [{ name: "ids" data_type: TYPE_INT64 dims: [-1] }]'),
          "model 'm'",
        ),
      (e: Error) =>
        e instanceof InvalidArgError && /input 'ids' has dynamic dims \[-1\].*min_shapes.*ids:1xN/.test(e.message),
    );
  });

  it('BAD CONFIG - an unknown precision is a load error listing the known ones', () => {
    assert.throws(
      () => onnxBuildOptions(cfg(`${io} parameters { key: "precision" value { string_value: "int4" } }`), "model 'm'"),
      /parameter precision is 'int4'; expected fp32, fp16 or bf16/,
    );
  });

  it("BAD CONFIG - a parameter naming a cache folder is refused: the cache is the operator's", () => {
    assert.throws(
      () =>
        onnxBuildOptions(
          cfg(`${io} parameters { key: "plan_cache_directory" value { string_value: "/tmp/x" } }`),
          "model 'm'",
        ),
      (e: Error) => e instanceof InvalidArgError && /plan_cache_directory' is refused.*operator's/.test(e.message),
    );
  });
});
