import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseModelConfigOrThrow } from '../../config/index.js';
import { engineOptions } from './backend.js';
import { backendOptions, modelOptions, parseBool } from './options.js';

const cfg = (text: string) => parseModelConfigOrThrow(`name: "m"\nbackend: "tensorrt"\n${text}`, 'config.pbtxt');

describe('TensorRT backend config (--backend-config=tensorrt,...)', () => {
  it("has Triton's defaults: no coalescing, no plugins, not version-compatible, DEVICE_BLOCKING", () => {
    const o = backendOptions({});
    assert.equal(o.coalesceRequestInput, false);
    assert.deepEqual(o.plugins, []);
    assert.equal(o.versionCompatible, false);
    assert.equal(o.executionPolicy, 'DEVICE_BLOCKING');
    assert.ok(Object.isFrozen(o));
  });

  it('reads every key; booleans as Triton parses them; plugins split on ;', () => {
    const o = backendOptions({
      'coalesce-request-input': 'TRUE',
      plugins: '/opt/a.so; /opt/b.so;',
      'version-compatible': 'on',
      'execution-policy': 'BLOCKING',
      'python-executable': '/usr/bin/python3',
      'start-timeout-seconds': '2.5',
      'shm-default-byte-size': '65536',
      'default-max-batch-size': '4',
    });
    assert.equal(o.coalesceRequestInput, true);
    assert.deepEqual(o.plugins, ['/opt/a.so', '/opt/b.so']);
    assert.equal(o.versionCompatible, true);
    assert.equal(o.executionPolicy, 'BLOCKING');
    assert.equal(o.startTimeoutMs, 2500);
    assert.equal(o.shmDefaultByteSize, 65536);
    assert.equal(parseBool('k', '0'), false);
  });

  it('BAD CONFIG - each bad value names the key and what it takes', () => {
    assert.throws(
      () => backendOptions({ 'coalesce-request-input': 'yes please' }),
      /coalesce-request-input=yes please: expected true or false/,
    );
    assert.throws(() => backendOptions({ plugins: 'libfoo.so' }), /'libfoo.so' is not an absolute path/);
    assert.throws(() => backendOptions({ plugins: ' ; ' }), /names no library/);
    assert.throws(() => backendOptions({ 'execution-policy': 'device_blocking' }), /expected DEVICE_BLOCKING/);
    assert.throws(() => backendOptions({ 'start-timeout-seconds': '0' }), /expected seconds > 0/);
    assert.throws(() => backendOptions({ 'shm-growth-byte-size': '10' }), /expected an integer >= 4096/);
    assert.throws(
      () => backendOptions({ version_compatible: 'true' }),
      /unknown key; the tensorrt backend knows coalesce-request-input/,
    );
  });
});

describe('TensorRT model config knobs', () => {
  it('defaults: STATIC, no graphs, sleeping event waits, one stream, no gather', () => {
    const m = modelOptions(cfg(''));
    assert.deepEqual(
      { ...m },
      {
        allocation: 'STATIC',
        graphs: false,
        graphSpecs: [],
        busyWaitEvents: false,
        outputCopyStream: false,
        gatherKernelBufferThreshold: 0,
        eagerBatching: false,
        notes: [],
      },
    );
  });

  it('reads the allocation strategy, cuda graphs with graph_spec, busy_wait_events, output_copy_stream, gather threshold, eager batching', () => {
    const m = modelOptions(
      cfg(`max_batch_size: 8
parameters { key: "execution_context_allocation_strategy" value { string_value: "ON_PROFILE_CHANGE" } }
optimization { cuda { graphs: true busy_wait_events: true output_copy_stream: true
  graph_spec { batch_size: 4 input { key: "x" value { dim: [128] } } } }
  gather_kernel_buffer_threshold: 3 eager_batching: true }`),
    );
    assert.equal(m.allocation, 'ON_PROFILE_CHANGE');
    assert.deepEqual(m.graphSpecs, [{ batchSize: 4, inputs: { x: [128] } }]);
    assert.equal(m.busyWaitEvents && m.outputCopyStream && m.graphs && m.eagerBatching, true);
    assert.equal(m.gatherKernelBufferThreshold, 3);
    assert.match(m.notes[0], /eager_batching has no effect/);
    assert.deepEqual(engineOptions(backendOptions({}), m), {
      coalesce: false,
      plugins: [],
      version_compatible: false,
      policy: 'DEVICE_BLOCKING',
      allocation: 'ON_PROFILE_CHANGE',
      graphs: true,
      graph_specs: [{ batch_size: 4, inputs: { x: [128] } }],
      busy_wait_events: true,
      output_copy_stream: true,
      gather_threshold: 3,
    });
  });

  it('BAD CONFIG - an unknown strategy, a graph batch beyond max_batch_size, graph_lower_bound, accelerators', () => {
    assert.throws(
      () =>
        modelOptions(cfg('parameters { key: "execution_context_allocation_strategy" value { string_value: "LAZY" } }')),
      /execution_context_allocation_strategy is 'LAZY'; expected STATIC .* or ON_PROFILE_CHANGE/,
    );
    assert.throws(
      () => modelOptions(cfg('max_batch_size: 4\noptimization { cuda { graphs: true graph_spec { batch_size: 8 } } }')),
      /graph_spec\[0\]: batch_size 8 must be between 1 and max_batch_size 4/,
    );
    assert.throws(
      () =>
        modelOptions(
          cfg(
            'max_batch_size: 4\noptimization { cuda { graphs: true graph_spec { batch_size: 2 graph_lower_bound { batch_size: 1 } } } }',
          ),
        ),
      /graph_lower_bound is not supported/,
    );
    assert.throws(
      () =>
        modelOptions(
          cfg('optimization { execution_accelerators { gpu_execution_accelerator [{ name: "tensorrt" }] } }'),
        ),
      /execution_accelerators do not apply to a TensorRT plan/,
    );
  });
});
