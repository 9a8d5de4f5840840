import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import koffi from 'koffi';
import { UnavailableError } from '../../../core/errors.js';
import { check, ortApi, OrtStatusError, type Out, type Ptr } from './api.js';
import { acquireAnyEnv, acquireEnv, envReferences } from './env.js';
import { createOutput } from './tensors.js';
import { defaultThreadPoolSize, runThreads, threadPoolSize } from './threadpool.js';

/** The C API table and the process-wide pieces: env reference counting, koffi's settings, libuv pool sizing. */

describe('onnxruntime C API table', () => {
  it('binds onnxruntime 1.30 and its functions sit at the indices we declared', () => {
    const api = ortApi();
    assert.equal(api.version, '1.30.0');
    assert.match(api.GetBuildInfoString() as string, /^ORT Build Info/);
    // Bad values must come back as onnxruntime's own complaints about those very options: a wrong index would
    // call something else entirely.
    const out: Out = [null];
    check(api.CreateSessionOptions(out));
    const so = out[0] as Ptr;
    try {
      assert.throws(
        () => check(api.SetSessionGraphOptimizationLevel(so, 7)),
        (e: unknown) => e instanceof OrtStatusError && /graph_optimization_level is not valid/.test(e.message),
      );
      assert.throws(
        () => check(api.SetSessionExecutionMode(so, 5)),
        (e: unknown) => e instanceof OrtStatusError && /execution_mode is not valid/.test(e.message),
      );
      check(api.AddSessionConfigEntry(so, 'session.use_device_allocator_for_initializers', '1'));
    } finally {
      api.ReleaseSessionOptions(so);
    }
  });

  it('runs koffi async calls on an 8 MiB stack (onnxruntime needs a thread-sized stack)', () => {
    ortApi();
    assert.ok((koffi.config().async_stack_size ?? 0) >= 8 * 1024 * 1024);
  });
});

describe('OrtEnv', () => {
  it('is shared by reference and released with the last reference', () => {
    const a = acquireEnv({ logSeverity: 4 });
    const b = acquireAnyEnv(4);
    assert.equal(a.env, b.env);
    assert.equal(envReferences(), 2);
    a.release();
    a.release(); // idempotent
    assert.equal(envReferences(), 1);
    b.release();
    assert.equal(envReferences(), 0);
  });

  it('refuses other global-pool settings while held; accepts them once released', () => {
    const a = acquireEnv({ logSeverity: 4 });
    assert.throws(
      () => acquireEnv({ logSeverity: 4, globalThreadPool: { intraOpThreads: 2, interOpThreads: 1 } }),
      (e: unknown) => e instanceof UnavailableError && /enable-global-threadpool/.test(e.message),
    );
    a.release();
    const g = acquireEnv({ logSeverity: 4, globalThreadPool: { intraOpThreads: 2, interOpThreads: 1 } });
    assert.equal(g.globalThreadPool, true);
    const any = acquireAnyEnv(4);
    assert.equal(any.globalThreadPool, true, 'a signature session joins the global pools');
    any.release();
    g.release();
    assert.equal(envReferences(), 0);
  });
});

describe('libuv pool sizing', () => {
  it('defaults to 4 for Node plus max(16, cores) for runs; reads UV_THREADPOOL_SIZE as libuv does', () => {
    assert.equal(defaultThreadPoolSize(2), 20);
    assert.equal(defaultThreadPoolSize(64), 68);
    assert.equal(threadPoolSize({}), 4);
    assert.equal(threadPoolSize({ UV_THREADPOOL_SIZE: '12' }), 12);
    assert.equal(threadPoolSize({ UV_THREADPOOL_SIZE: '5000' }), 1024);
    assert.equal(runThreads({ UV_THREADPOOL_SIZE: '20' }), 16);
    assert.equal(runThreads({}), 1);
  });
});

describe('preallocated outputs', () => {
  it('lie in prefaulted memory when it is given and large enough, else in memory of their own', () => {
    const lease = acquireEnv({ logSeverity: 4 });
    const api = ortApi();
    try {
      const memory = new ArrayBuffer(256);
      const inMemory = createOutput('Y', 'FP32', [4, 8], lease.cpuMemoryInfo, memory);
      const data = inMemory.tensor.data as Float32Array;
      assert.equal(data.buffer, memory, 'the output is the first 128 bytes of the given memory');
      assert.equal(data.length, 32);
      const out: Out = [null];
      check(api.GetTensorMutableData(inMemory.value, out));
      new Float32Array(koffi.view(out[0], 128)).fill(2.5); // what onnxruntime writes lands in the tensor
      assert.equal(data[31], 2.5);
      api.ReleaseValue(inMemory.value);
      const small = createOutput('Y', 'FP32', [4, 8], lease.cpuMemoryInfo, new ArrayBuffer(64));
      assert.notEqual((small.tensor.data as Float32Array).buffer.byteLength, 64, 'too small: memory of its own');
      api.ReleaseValue(small.value);
    } finally {
      lease.release();
    }
  });
});
