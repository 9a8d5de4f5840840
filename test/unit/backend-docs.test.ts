import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { cudaPlan, openvinoPlan, tensorrtPlan } from '../../src/backends/onnxruntime/provider-options.js';
import { pythonOptions } from '../../src/backends/python/options.js';
import { backendOptions as pytorchOptions, modelOptions as pytorchModel } from '../../src/backends/pytorch/options.js';
import { backendOptions as tensorrtOptions } from '../../src/backends/tensorrt/options.js';

/**
 * Each backend's page lists every option the backend reads. The lists come from the backends themselves: the keys
 * an unknown key's error names (the one list each backend checks against), so a key added to the code and not to
 * the page fails here.
 */
const page = (name: string): string => readFileSync(new URL(`../../docs/${name}-backend.md`, import.meta.url), 'utf8');

/** The keys an error message lists after "knows"/"known:", comma-separated. */
function keysNamed(thrower: () => unknown): string[] {
  try {
    thrower();
  } catch (e) {
    const list = /(?:knows|known:)\s+(.*)$/.exec((e as Error).message)?.[1] ?? '';
    return list.split(/,\s*/).filter((k) => k !== '');
  }
  assert.fail('an unknown key was accepted');
}

function assertListed(doc: string, keys: readonly string[]): void {
  assert.ok(keys.length > 0);
  const missing = keys.filter((k) => !doc.includes(`\`${k}\``));
  assert.deepEqual(missing, [], `not in the page: ${missing.join(', ')}`);
}

describe('backend option pages', () => {
  it('onnxruntime: every backend-config key, model parameter and accelerator parameter', () => {
    const doc = page('onnxruntime');
    const field = 'f';
    assertListed(
      doc,
      keysNamed(() => tensorrtPlan(field, { parameters: { no_such: '1' } })),
    );
    assertListed(
      doc,
      keysNamed(() => cudaPlan(field, { parameters: { no_such: '1' } }, {})).filter((k) => k !== 'device_id'),
    );
    assertListed(
      doc,
      keysNamed(() => openvinoPlan(field, { parameters: { no_such: '1' } })),
    );
    assertListed(doc, [
      'default-max-batch-size',
      'enable-global-threadpool',
      'transport',
      'intra_op_thread_count',
      'inter_op_thread_count',
      'execution_mode',
      'enable_mem_arena',
      'enable_mem_pattern',
      'memory.enable_memory_arena_shrinkage',
      'session.use_device_allocator_for_initializers',
    ]);
    assert.match(doc, /intra-op default is Nereid's own, and differs from Triton's/);
  });

  it('tensorrt, pytorch and python: every --backend-config key', () => {
    assertListed(
      page('tensorrt'),
      keysNamed(() => tensorrtOptions({ no_such: '1' })),
    );
    assertListed(
      page('pytorch'),
      keysNamed(() => pytorchOptions({ no_such: '1' })),
    );
    assertListed(
      page('python'),
      keysNamed(() => pythonOptions({ no_such: '1' })),
    );
  });

  it('pytorch: every model parameter it reads', () => {
    // Each parameter given a bad boolean/count fails naming itself: the page must name each one.
    const doc = page('pytorch');
    const read = [
      'DISABLE_OPTIMIZED_EXECUTION',
      'INFERENCE_MODE',
      'ENABLE_CACHE_CLEANING',
      'ENABLE_WEIGHT_SHARING',
      'ENABLE_JIT_EXECUTOR',
      'ENABLE_JIT_PROFILING',
      'ENABLE_TENSOR_FUSER',
      'ENABLE_NVFUSER',
      'INTRA_OP_THREAD_COUNT',
      'INTER_OP_THREAD_COUNT',
    ];
    for (const key of read) {
      assert.throws(() => pytorchModel({ name: 'm', parameters: { [key]: { string_value: 'x' } } }), new RegExp(key));
      assert.ok(doc.includes(`\`${key}\``), key);
    }
  });

  it("README's first paragraph and package.json's description name all four backends, and no page says they are UNSUPPORTED", () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const first = readme.split('\n\n')[1];
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      description: string;
    };
    for (const b of ['onnxruntime', 'tensorrt', 'pytorch', 'python']) {
      assert.match(first, new RegExp(`\`${b}\``), `README: ${b}`);
      assert.match(pkg.description, new RegExp(`\\b${b}\\b`), `package.json: ${b}`);
    }
    const operating = readFileSync(new URL('../../docs/operating.md', import.meta.url), 'utf8');
    const kserve = readFileSync(new URL('../../deploy/kserve/servingruntime.yaml', import.meta.url), 'utf8');
    for (const text of [readme, operating, kserve]) {
      assert.doesNotMatch(text, /(TorchScript|TensorRT plan)[^.]*fails (its|the) load (as|with) UNSUPPORTED/);
      assert.doesNotMatch(
        text,
        /(sequence batching|ensembles|warm-up|response cache)[^.]*fails the load as UNSUPPORTED/,
      );
    }
  });
});
