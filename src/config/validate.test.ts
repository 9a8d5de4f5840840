import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatConfigError } from './config-error.js';
import { ENSEMBLE, EVERYTHING, SEQUENCE } from './fixtures.test-data.js';
import { parseModelConfig } from './text-parser.js';
import { validateModelConfig } from './validate.js';

function check(text: string, modelName?: string): string[] {
  const { config, errors } = parseModelConfig(text, 'm/config.pbtxt');
  assert.deepEqual(errors, []);
  return validateModelConfig(config, 'm/config.pbtxt', { modelName }).map(formatConfigError);
}

const SIMPLE =
  'name: "m" max_batch_size: 8 input { name: "I" data_type: TYPE_FP32 dims: [4] } output { name: "O" data_type: TYPE_FP32 dims: [4] }';

describe('validateModelConfig', () => {
  it('accepts valid configs', () => {
    assert.deepEqual(check(SIMPLE, 'm'), []);
    assert.deepEqual(check(SEQUENCE), []);
    assert.deepEqual(check(ENSEMBLE), []);
    assert.deepEqual(check('input { name: "S" data_type: TYPE_FP32 dims: [1] reshape { shape: [] } }'), []);
  });

  it('BAD CALL - rejects a name that differs from the model directory', () => {
    assert.deepEqual(check(SIMPLE, 'other'), [
      "m/config.pbtxt: ModelConfig.name: 'm' does not match the model directory 'other'; rename one or drop 'name'",
    ]);
  });

  it('BAD CALL - rejects bad tensors: missing name, type or dims, bad dims, duplicate names, reshape size', () => {
    const errors = check(`
      max_batch_size: -1
      input { data_type: TYPE_INVALID }
      input { name: "A" data_type: TYPE_FP32 dims: [0, -2] }
      input { name: "A" data_type: TYPE_FP32 dims: [4] reshape { shape: [3] } }
      input { name: "F" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [4] }
      output { name: "O" dims: [1] }
    `);
    assert.deepEqual(errors, [
      'm/config.pbtxt: ModelConfig.max_batch_size: must be >= 0 (0 means the model has no batch dimension), got -1',
      'm/config.pbtxt: ModelConfig.input[0].name: every input needs a name',
      "m/config.pbtxt: ModelConfig.input[0].data_type: input '' needs a data_type such as TYPE_FP32",
      "m/config.pbtxt: ModelConfig.input[0].dims: input '' needs dims (use -1 for a variable-size dimension, or reshape: { shape: [ ] } with dims: [ 1 ] for a scalar)",
      'm/config.pbtxt: ModelConfig.input[1].dims[0]: dimension 0 is not allowed; use a size >= 1, or -1 for a variable-size dimension',
      'm/config.pbtxt: ModelConfig.input[1].dims[1]: dimension -2 is not allowed; use a size >= 1, or -1 for a variable-size dimension',
      "m/config.pbtxt: ModelConfig.input[2].name: input 'A' is declared more than once",
      'm/config.pbtxt: ModelConfig.input[2].reshape: reshape [3] has 3 elements but dims [4] have 4; they must match',
      'm/config.pbtxt: ModelConfig.input[3].format: FORMAT_NHWC needs exactly 3 dims (without the batch dimension), got [4]',
      "m/config.pbtxt: ModelConfig.output[0].data_type: output 'O' needs a data_type such as TYPE_FP32",
    ]);
  });

  it('BAD CALL - rejects dynamic batching settings that exceed the model limits', () => {
    const errors = check(`
      max_batch_size: 8
      dynamic_batching { preferred_batch_size: [0, 16] priority_levels: 2 default_priority_level: 3
                         priority_queue_policy { key: 5 value {} } }
    `);
    assert.deepEqual(errors, [
      'm/config.pbtxt: ModelConfig.dynamic_batching.preferred_batch_size[0]: must be >= 1, got 0',
      'm/config.pbtxt: ModelConfig.dynamic_batching.preferred_batch_size[1]: 16 is larger than max_batch_size 8; lower it or raise max_batch_size',
      'm/config.pbtxt: ModelConfig.dynamic_batching.default_priority_level: must be between 1 and priority_levels (2), got 3',
      'm/config.pbtxt: ModelConfig.dynamic_batching.priority_queue_policy["5"]: priority level 5 is outside 1..2 (priority_levels)',
    ]);
  });

  it('BAD CALL - rejects instance groups with count < 1 or GPUs on a CPU group, and bad version policies', () => {
    const errors = check(`
      instance_group [ { count: 0 kind: KIND_CPU gpus: [0] } ]
      version_policy { specific { versions: [0] } }
    `);
    assert.deepEqual(errors, [
      'm/config.pbtxt: ModelConfig.version_policy.specific.versions[0]: version 0 is not valid; versions are numbered from 1',
      'm/config.pbtxt: ModelConfig.instance_group[0].count: must be >= 1, got 0',
      "m/config.pbtxt: ModelConfig.instance_group[0].gpus: a KIND_CPU group must not list gpus; remove 'gpus' or use KIND_GPU",
    ]);
    assert.deepEqual(check('version_policy { latest { num_versions: 0 } }'), [
      'm/config.pbtxt: ModelConfig.version_policy.latest.num_versions: must be >= 1 to serve at least one version',
    ]);
  });

  it('BAD CALL - rejects incomplete sequence controls and states', () => {
    const errors = check(`
      sequence_batching {
        control_input { name: "S" control { kind: CONTROL_SEQUENCE_START int32_false_true: [1] } }
        control_input { name: "C" control { kind: CONTROL_SEQUENCE_CORRID } }
        state { input_name: "I" }
      }
    `);
    assert.deepEqual(errors, [
      'm/config.pbtxt: ModelConfig.sequence_batching.control_input[0].control[0]: CONTROL_SEQUENCE_START needs exactly one of int32_false_true, fp32_false_true or bool_false_true with two values [false, true]',
      'm/config.pbtxt: ModelConfig.sequence_batching.control_input[1].control[0].data_type: a CORRID control needs data_type TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING',
      'm/config.pbtxt: ModelConfig.sequence_batching.state[0].output_name: a state needs the name of the model output that produces it',
      'm/config.pbtxt: ModelConfig.sequence_batching.state[0].data_type: a state needs a data_type',
    ]);
  });

  it('BAD CALL - rejects ensembles without steps, maps or the ensemble platform', () => {
    assert.deepEqual(check('platform: "onnxruntime_onnx" ensemble_scheduling { step { model_version: -2 } }'), [
      'm/config.pbtxt: ModelConfig.platform: ensemble_scheduling needs platform: "ensemble", got \'onnxruntime_onnx\'',
      'm/config.pbtxt: ModelConfig.ensemble_scheduling.step[0].model_name: every step needs the name of the model it runs',
      'm/config.pbtxt: ModelConfig.ensemble_scheduling.step[0].model_version: use -1 for the latest version, or a version number >= 1',
      'm/config.pbtxt: ModelConfig.ensemble_scheduling.step[0].input_map: map at least one input of the step model to an ensemble tensor',
      'm/config.pbtxt: ModelConfig.ensemble_scheduling.step[0].output_map: map at least one output of the step model to an ensemble tensor',
    ]);
    assert.deepEqual(check('platform: "ensemble"'), [
      "m/config.pbtxt: ModelConfig.ensemble_scheduling: platform 'ensemble' needs ensemble_scheduling { step [ ... ] }",
    ]);
  });

  it('BAD CALL - rejects warmup samples without data or larger than the batch limit, and cache with decoupled', () => {
    const errors = check(`
      max_batch_size: 2
      model_warmup { name: "w" batch_size: 4 inputs { key: "I" value { data_type: TYPE_FP32 dims: [1] } } }
      response_cache { enable: true } model_transaction_policy { decoupled: true }
    `);
    assert.deepEqual(errors, [
      'm/config.pbtxt: ModelConfig.model_warmup[0].batch_size: 4 is larger than max_batch_size 2',
      'm/config.pbtxt: ModelConfig.model_warmup[0].inputs["I"]: set one of zero_data, random_data or input_data_file',
      'm/config.pbtxt: ModelConfig.response_cache.enable: the response cache does not support decoupled models; disable one of them',
    ]);
  });

  it('accepts the config that touches every message', () => {
    assert.deepEqual(check(EVERYTHING), []);
  });
});
