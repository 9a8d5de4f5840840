import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgError } from '../core/errors.js';
import { formatConfigError } from './config-error.js';
import { ENSEMBLE, EVERYTHING, SEQUENCE } from './fixtures.test-data.js';
import { modelConfigFromJson, modelConfigToJson, readModelConfigJson } from './json.js';
import type { ModelConfig } from './model-config.js';
import { parseModelConfig } from './text-parser.js';

const parse = (text: string): ModelConfig => parseModelConfig(text, 'config.pbtxt').config;

describe('modelConfigToJson', () => {
  it("prints the 'simple' config as Triton does: every field, defaults included", () => {
    const json = modelConfigToJson(
      parse(
        'name: "simple" max_batch_size: 8 input { name: "INPUT0" data_type: TYPE_INT32 dims: [16] } version_policy { latest { num_versions: 1 } }',
      ),
    );
    assert.deepEqual(json, {
      name: 'simple',
      platform: '',
      backend: '',
      runtime: '',
      version_policy: { latest: { num_versions: 1 } },
      max_batch_size: 8,
      input: [
        {
          name: 'INPUT0',
          data_type: 'TYPE_INT32',
          format: 'FORMAT_NONE',
          dims: [16],
          is_shape_tensor: false,
          allow_ragged_batch: false,
          optional: false,
          is_non_linear_format_io: false,
        },
      ],
      output: [],
      batch_input: [],
      batch_output: [],
      instance_group: [],
      default_model_filename: '',
      cc_model_filenames: {},
      metric_tags: {},
      parameters: {},
      model_warmup: [],
    });
  });

  it('prints int64 and uint64 as JSON numbers and enums by name', () => {
    const json = modelConfigToJson(
      parse(
        'dynamic_batching { max_queue_delay_microseconds: 9007199254740991 default_queue_policy { timeout_action: DELAY } }',
      ),
    );
    const db = json.dynamic_batching as Record<string, unknown>;
    assert.equal(db.max_queue_delay_microseconds, 9007199254740991);
    assert.equal(db.priority_levels, 0);
    assert.deepEqual(db.default_queue_policy, {
      timeout_action: 'DELAY',
      default_timeout_microseconds: 0,
      allow_timeout_override: false,
      max_queue_size: 0,
    });
    assert.match(JSON.stringify(json), /"max_queue_delay_microseconds":9007199254740991/);
  });

  it('prints only the oneof member that is set, and no unset messages', () => {
    const json = modelConfigToJson(parse(SEQUENCE));
    assert.equal('dynamic_batching' in json, false);
    assert.equal('ensemble_scheduling' in json, false);
    assert.equal('optimization' in json, false);
    const sb = json.sequence_batching as Record<string, unknown>;
    assert.equal('oldest' in sb, false);
    assert.deepEqual(sb.direct, { max_queue_delay_microseconds: 10, minimum_slot_utilization: 0.5 });
    const state = (sb.state as Array<{ initial_state: Array<Record<string, unknown>> }>)[0];
    assert.deepEqual(state.initial_state[0], { data_type: 'TYPE_INT32', dims: [1], data_file: 'init', name: 'i' });
  });

  it('prints maps as objects: string parameters, message parameters, uint64 keys', () => {
    const json = modelConfigToJson(parse(EVERYTHING));
    assert.deepEqual(json.parameters, { intra_op_thread_count: { string_value: '0' } });
    assert.deepEqual(json.cc_model_filenames, { '8.0': 'a100.plan' });
    const db = json.dynamic_batching as { priority_queue_policy: Record<string, unknown> };
    assert.deepEqual(Object.keys(db.priority_queue_policy), ['2']);
    const warm = (json.model_warmup as Array<{ inputs: Record<string, unknown> }>)[0];
    assert.deepEqual(warm.inputs.IN0, { data_type: 'TYPE_FP32', dims: [3, 4, 224], random_data: true });
    const buckets = (json.model_metrics as { metric_control: [{ histogram_options: { buckets: unknown[] } }] })
      .metric_control[0].histogram_options.buckets;
    assert.deepEqual(buckets, [0.5, 1, 2.5, 'Infinity']);
    const step = (modelConfigToJson(parse(ENSEMBLE)).ensemble_scheduling as { step: Array<Record<string, unknown>> })
      .step[0];
    assert.equal(step.model_version, -1);
  });

  it('reads back its own output to the same config with defaults filled', () => {
    const json = modelConfigToJson(parse(EVERYTHING));
    const back = modelConfigFromJson(JSON.parse(JSON.stringify(json)), 'json');
    assert.deepEqual(modelConfigToJson(back), json);
  });
});

describe('modelConfigFromJson', () => {
  it('accepts proto and camelCase names, case-insensitive enums, int64 as number or string', () => {
    const config = modelConfigFromJson(
      {
        name: 'm',
        maxBatchSize: 4,
        input: [{ name: 'x', dataType: 'type_fp32', dims: ['-1', 3] }],
        instance_group: [{ kind: 'kind_cpu', count: 2 }],
        dynamic_batching: { max_queue_delay_microseconds: '100' },
        parameters: { k: { string_value: 'v' } },
        optimization: null,
      },
      'load request',
    );
    assert.deepEqual(config, {
      name: 'm',
      max_batch_size: 4,
      input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [-1, 3] }],
      instance_group: [{ kind: 'KIND_CPU', count: 2 }],
      dynamic_batching: { max_queue_delay_microseconds: 100 },
      parameters: { k: { string_value: 'v' } },
    });
  });

  it('accepts the JSON text as a string', () => {
    assert.deepEqual(modelConfigFromJson('{"name":"m","max_batch_size":2}', 'load request'), {
      name: 'm',
      max_batch_size: 2,
    });
  });

  it('BAD CALL - rejects unknown fields, naming the path', () => {
    assert.throws(
      () => modelConfigFromJson({ name: 'm', input: [{ name: 'x', dimz: [1] }], colour: 'red' }, 'load request'),
      (err: unknown) =>
        err instanceof InvalidArgError &&
        err.message ===
          'invalid model configuration (2 problems):\n' +
            "load request: unknown field 'dimz' in ModelInput at ModelConfig.input[0]; did you mean 'dims'?\n" +
            "load request: unknown field 'colour' in ModelConfig at ModelConfig",
    );
  });

  it('BAD CALL - rejects wrong types, bad enums, oneof conflicts and unsafe integers', () => {
    const { errors } = readModelConfigJson(
      {
        max_batch_size: 'abc',
        input: [{ data_type: 'TYPE_FP23', dims: [1.5, 2 ** 60] }],
        dynamic_batching: {},
        sequence_batching: {},
        output: {},
      },
      'load request',
    );
    assert.deepEqual(errors.map(formatConfigError), [
      'load request: expected an integer for ModelConfig.max_batch_size, got "abc"',
      "load request: unknown DataType value 'TYPE_FP23' for ModelConfig.input[0].data_type; did you mean 'TYPE_FP32'?",
      'load request: expected an integer for ModelConfig.input[0].dims[0], got 1.5',
      'load request: expected a safe integer (int64 values are kept as JS numbers, exact only within ±9007199254740991) for ModelConfig.input[0].dims[1], got 1152921504606847000',
      "load request: field 'sequence_batching' conflicts with 'dynamic_batching': both belong to oneof 'scheduling_choice' in ModelConfig; set only one",
      'load request: expected a JSON array for ModelConfig.output, got {}',
    ]);
  });

  it('BAD CALL - rejects JSON that is not an object or not JSON', () => {
    assert.throws(() => modelConfigFromJson([], 'load request'), /expected a JSON object for ModelConfig/);
    assert.throws(() => modelConfigFromJson('{name:', 'load request'), /model config is not valid JSON/);
  });
});
