import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach } from 'node:test';
import type { Instance } from '../../src/backends/contract.js';
import { config, fp32, loadTrt, removeModel, request, writeModel, type FakePlan, type LoadedTrt } from './tensorrt.js';

/**
 * What the tensorrt backend's unit tests share: models and instances loaded through the real transport against
 * the test double, each ended after its test, and a check at the end of the file that no shared-memory segment
 * outlived its engine process. Call `tensorrtHarness()` once at the top of a test file: it registers the hooks.
 */
export function tensorrtHarness(): {
  load(plan: FakePlan | Buffer, cfgText?: string, opts?: Parameters<typeof loadTrt>[3]): Promise<LoadedTrt>;
  instance(m: LoadedTrt, spec?: Parameters<LoadedTrt['instance']>[0]): Promise<Instance & { pid: number }>;
  /** Runs `f` after the test, after what was registered later. */
  cleanup(f: () => Promise<void> | void): void;
} {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });
  after(() => {
    const left = readdirSync('/dev/shm').filter((n) => n.startsWith(`nereid_trt_${process.pid}x`));
    assert.deepEqual(left, [], 'no shared-memory segment outlives its process');
  });
  return {
    cleanup: (f) => void cleanup.push(f),
    async load(plan, cfgText = 'name: "m"\nbackend: "tensorrt"', opts = {}) {
      const { dir, root, planPath } = writeModel('m', plan);
      cleanup.push(() => removeModel(root));
      const m = await loadTrt(planPath, dir, config(cfgText), opts);
      cleanup.push(() => m.handle.unload());
      return m;
    },
    async instance(m, spec = {}) {
      const inst = await m.instance(spec);
      cleanup.push(() => inst.destroy());
      return inst;
    },
  };
}

/** A file for the double's event log (NEREID_TRT_DOUBLE_LOG). */
export function logFile(): string {
  return join(mkdtempSync(join(tmpdir(), 'nereid-trt-log-')), 'events.jsonl');
}

const ones = (n: number, v = 1): number[][] => Array.from({ length: n }, () => [v, v, v, v]);

/** A request of the add_sub plan: `rows` rows of INPUT0 = v, INPUT1 = 1. */
export const addSubRequest = (rows: number, v = 1) =>
  request([fp32('INPUT0', ones(rows, v)), fp32('INPUT1', ones(rows, 1))], ['OUTPUT0', 'OUTPUT1']);
