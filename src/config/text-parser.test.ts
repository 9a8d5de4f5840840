import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgError } from '../core/errors.js';
import { formatConfigError } from './config-error.js';
import { parseModelConfig, parseModelConfigOrThrow } from './text-parser.js';

const FILE = 'simple/config.pbtxt';

/** Parses and asserts there were no errors. */
function parse(text: string): Record<string, unknown> {
  const { config, errors } = parseModelConfig(text, FILE);
  assert.deepEqual(errors.map(formatConfigError), []);
  return config as Record<string, unknown>;
}

/** Parses and returns the formatted errors. */
function problems(text: string): string[] {
  return parseModelConfig(text, FILE).errors.map(formatConfigError);
}

describe('parseModelConfig - syntax', () => {
  it('reads every scalar kind', () => {
    const c = parse(`
      name: "m" max_batch_size: 8
      dynamic_batching { max_queue_delay_microseconds: 100 preserve_ordering: true }
      optimization { gather_kernel_buffer_threshold: 4294967295 }
      version_policy { latest { num_versions: 2 } }
      instance_group { secondary_devices { device_id: -9007199254740991 } }
    `);
    assert.equal(c.name, 'm');
    assert.equal(c.max_batch_size, 8);
    assert.deepEqual(c.dynamic_batching, { max_queue_delay_microseconds: 100, preserve_ordering: true });
    assert.deepEqual(c.optimization, { gather_kernel_buffer_threshold: 4294967295 });
    assert.deepEqual(c.instance_group, [{ secondary_devices: [{ device_id: -9007199254740991 }] }]);
  });

  it('reads floats, doubles, inf, nan and negative numbers', () => {
    const c = parse(`
      sequence_batching {
        direct { minimum_slot_utilization: 0.5f }
        control_input { name: "S" control { kind: CONTROL_SEQUENCE_START fp32_false_true: [ -1.5e2, inf, -inf, nan, 1, .25 ] } }
      }
      model_metrics { metric_control { histogram_options { buckets: [ 1e-3, - 2 ] } } }
      input { name: "x" dims: [ -1, 0x10, 010 ] }
    `);
    const sb = c.sequence_batching as {
      direct: unknown;
      control_input: Array<{ control: Array<{ fp32_false_true: number[] }> }>;
    };
    assert.deepEqual(sb.direct, { minimum_slot_utilization: 0.5 });
    assert.deepEqual(sb.control_input[0].control[0].fp32_false_true, [-150, Infinity, -Infinity, NaN, 1, 0.25]);
    assert.deepEqual(
      (c.model_metrics as never as { metric_control: [{ histogram_options: { buckets: number[] } }] }).metric_control[0]
        .histogram_options.buckets,
      [0.001, -2],
    );
    assert.deepEqual((c.input as Array<{ dims: number[] }>)[0].dims, [-1, 16, 8]);
  });

  it('reads every spelling of bool', () => {
    const c = parse(`
      input { name: "a" optional: true } input { name: "b" optional: True } input { name: "c" optional: t }
      input { name: "d" optional: 1 } input { name: "e" optional: false } input { name: "f" optional: False }
      input { name: "g" optional: f } input { name: "h" optional: 0 }
    `);
    assert.deepEqual(
      (c.input as Array<{ optional: boolean }>).map((i) => i.optional),
      [true, true, true, true, false, false, false, false],
    );
  });

  it('reads enums by name and by number', () => {
    const c = parse('input { data_type: TYPE_FP32 format: 2 }');
    assert.deepEqual(c.input, [{ data_type: 'TYPE_FP32', format: 'FORMAT_NCHW' }]);
  });

  it('accepts messages with or without a colon, with {} or <>', () => {
    const c = parse(
      'version_policy: { all {} }\nresponse_cache < enable: true >\nmodel_transaction_policy: < decoupled: false >',
    );
    assert.deepEqual(c.version_policy, { all: {} });
    assert.deepEqual(c.response_cache, { enable: true });
    assert.deepEqual(c.model_transaction_policy, { decoupled: false });
  });

  it('reads repeated fields as lists, repeated keys, and lists of messages', () => {
    const c = parse(`
      input [ { name: "a" dims: [ 1, 2 ] }, { name: "b" dims: 3 dims: 4 } ]
      input { name: "c" dims: [] }
      output: [ ]
    `);
    assert.deepEqual(c.input, [
      { name: 'a', dims: [1, 2] },
      { name: 'b', dims: [3, 4] },
      { name: 'c', dims: [] },
    ]);
    assert.deepEqual(c.output, []);
  });

  it('reads maps of messages, of strings, and with integer keys', () => {
    const c = parse(`
      parameters { key: "x" value: { string_value: "1" } }
      parameters { value { string_value: "2" } key: "y" }
      metric_tags { key: "a" value: "b" }
      metric_tags [ { key: "c", value: "d" } ]
      dynamic_batching { priority_queue_policy { key: 2 value { max_queue_size: 5 } } }
    `);
    assert.deepEqual(c.parameters, { x: { string_value: '1' }, y: { string_value: '2' } });
    assert.deepEqual(c.metric_tags, { a: 'b', c: 'd' });
    assert.deepEqual(c.dynamic_batching, { priority_queue_policy: { '2': { max_queue_size: 5 } } });
  });

  it('keeps a map key named __proto__ as plain data', () => {
    const c = parse('metric_tags { key: "__proto__" value: "x" }');
    assert.deepEqual(Object.keys(c.metric_tags as object), ['__proto__']);
    assert.equal(Object.getPrototypeOf(c.metric_tags), Object.prototype);
  });

  it('decodes string escapes and joins adjacent strings', () => {
    const c = parse(
      String.raw`name: "a\n\t\"\'\\" 'b"c' "\101\x42\u00e9" "\343\201\202"` + '\nbackend: "onnx" \n "runtime"',
    );
    assert.equal(c.name, 'a\n\t"\'\\b"cABéあ');
    assert.equal(c.backend, 'onnxruntime');
  });

  it('ignores # comments and accepts , and ; separators', () => {
    const c = parse('# header\nname: "m", # trailing\nplatform: "onnxruntime_onnx";\ninput { name: "a"; dims: [1], }');
    assert.deepEqual(c, { name: 'm', platform: 'onnxruntime_onnx', input: [{ name: 'a', dims: [1] }] });
  });

  it('leaves absent fields absent', () => {
    assert.deepEqual(parse(''), {});
    assert.deepEqual(parse('input {}'), { input: [{}] });
  });
});

describe('parseModelConfig - Triton examples', () => {
  it("reads the 'simple' model's config", () => {
    const c = parse(`
name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
`);
    assert.equal(c.max_batch_size, 8);
    assert.equal((c.input as unknown[]).length, 2);
    assert.deepEqual((c.output as unknown[])[1], { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] });
  });

  it('reads dynamic batching, instance groups, accelerators, parameters and version policy', () => {
    const c = parse(`
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100 }
instance_group [ { count: 2 kind: KIND_CPU } ]
optimization { execution_accelerators {
  gpu_execution_accelerator : [ { name : "tensorrt" parameters { key: "precision_mode" value: "FP16" } } ]
}}
parameters { key: "intra_op_thread_count" value: { string_value: "0" } }
version_policy: { specific: { versions: [1,3] } }
`);
    assert.deepEqual(c.dynamic_batching, { preferred_batch_size: [4, 8], max_queue_delay_microseconds: 100 });
    assert.deepEqual(c.instance_group, [{ count: 2, kind: 'KIND_CPU' }]);
    assert.deepEqual(c.optimization, {
      execution_accelerators: {
        gpu_execution_accelerator: [{ name: 'tensorrt', parameters: { precision_mode: 'FP16' } }],
      },
    });
    assert.deepEqual(c.parameters, { intra_op_thread_count: { string_value: '0' } });
    assert.deepEqual(c.version_policy, { specific: { versions: [1, 3] } });
  });

  it('reads sequence batching with control inputs and implicit state', () => {
    const c = parse(`
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2 ] }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  state [ { input_name: "IN_STATE" output_name: "OUT_STATE" data_type: TYPE_FP32 dims: [ -1 ]
            initial_state: { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true name: "init" } } ]
}`);
    const sb = c.sequence_batching as Record<string, unknown>;
    assert.equal(sb.max_sequence_idle_microseconds, 5000000);
    assert.deepEqual(sb.oldest, { max_candidate_sequences: 4, preferred_batch_size: [2] });
    assert.deepEqual((sb.control_input as unknown[])[1], {
      name: 'CORRID',
      control: [{ kind: 'CONTROL_SEQUENCE_CORRID', data_type: 'TYPE_UINT64' }],
    });
    assert.deepEqual((sb.state as Array<Record<string, unknown>>)[0].initial_state, [
      { data_type: 'TYPE_FP32', dims: [1], zero_data: true, name: 'init' },
    ]);
  });

  it('reads ensemble steps with input and output maps', () => {
    const c = parse(`
platform: "ensemble"
ensemble_scheduling {
  step [
    { model_name: "preprocess" model_version: -1 input_map { key: "RAW" value: "IMAGE" } output_map { key: "OUT" value: "prep" } },
    { model_name: "classifier" model_version: 2 input_map { key: "INPUT" value: "prep" } output_map { key: "PROB" value: "SCORES" } }
  ]
}`);
    assert.deepEqual((c.ensemble_scheduling as { step: unknown[] }).step[0], {
      model_name: 'preprocess',
      model_version: -1,
      input_map: { RAW: 'IMAGE' },
      output_map: { OUT: 'prep' },
    });
  });

  it('reads model warmup', () => {
    const c = parse(`
model_warmup [{
  name: "zeros" batch_size: 4 count: 2
  inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } }
  inputs { key: "INPUT1" value: { data_type: TYPE_STRING dims: [ 1 ] input_data_file: "raw" } }
}]`);
    assert.deepEqual(c.model_warmup, [
      {
        name: 'zeros',
        batch_size: 4,
        count: 2,
        inputs: {
          INPUT0: { data_type: 'TYPE_FP32', dims: [16], zero_data: true },
          INPUT1: { data_type: 'TYPE_STRING', dims: [1], input_data_file: 'raw' },
        },
      },
    ]);
  });
});

describe('parseModelConfig - errors', () => {
  it('BAD CALL - suggests the field meant by an unknown name, with file:line:col', () => {
    const text =
      'name: "simple"\nmax_batch_size: 8\ninput [\n  {\n    name: "INPUT0"\n    data_type: TYPE_INT32\n  dimz: [ 16 ]\n  }\n]\n';
    assert.deepEqual(problems(text), [
      "simple/config.pbtxt:7:3: unknown field 'dimz' in ModelInput; did you mean 'dims'?",
    ]);
    assert.equal(parseModelConfig(text, FILE).errors[0].path, 'ModelConfig.input[0].dimz');
  });

  it('BAD CALL - reports an unknown field without a suggestion when nothing is close, and goes on', () => {
    assert.deepEqual(problems('colour { a: [1, 2] b: "x" }\nmax_batch_size: "abc"'), [
      "simple/config.pbtxt:1:1: unknown field 'colour' in ModelConfig",
      'simple/config.pbtxt:2:17: expected an integer for ModelConfig.max_batch_size, got "abc"',
    ]);
  });

  it('BAD CALL - rejects wrong scalar types', () => {
    assert.deepEqual(problems('max_batch_size: abc\nname: 5\ninput { optional: yes dims: 1.5 }'), [
      'simple/config.pbtxt:1:17: expected an integer for ModelConfig.max_batch_size, got "abc"',
      'simple/config.pbtxt:2:7: expected a string for ModelConfig.name, got "5"',
      'simple/config.pbtxt:3:19: expected true or false for ModelConfig.input[0].optional, got "yes"',
      'simple/config.pbtxt:3:29: expected an integer for ModelConfig.input[0].dims, got "1.5"',
    ]);
  });

  it('BAD CALL - rejects an unknown enum value with a suggestion', () => {
    assert.deepEqual(problems('input { data_type: TYPE_FP23 }\ninstance_group { kind: 7 }'), [
      "simple/config.pbtxt:1:20: unknown DataType value 'TYPE_FP23' for ModelConfig.input[0].data_type; did you mean 'TYPE_FP32'?",
      'simple/config.pbtxt:2:24: 7 is not a Kind value for ModelConfig.instance_group[0].kind (known: KIND_AUTO, KIND_GPU, KIND_CPU, KIND_MODEL)',
    ]);
  });

  it('BAD CALL - rejects out-of-range and unsafe integers', () => {
    assert.deepEqual(
      problems(
        'max_batch_size: 2147483648\ninput { dims: 9007199254740993 }\nresponse_cache {}\nmodel_warmup { batch_size: -1 }',
      ),
      [
        'simple/config.pbtxt:1:17: value 2147483648 for ModelConfig.max_batch_size is out of range for int32 (-2147483648 to 2147483647)',
        'simple/config.pbtxt:2:15: value 9007199254740993 for ModelConfig.input[0].dims is not a safe integer: Nereid keeps int64 values as JS numbers, which are exact only within ±9007199254740991',
        'simple/config.pbtxt:4:29: value -1 for ModelConfig.model_warmup[0].batch_size is out of range for uint32 (0 to 4294967295)',
      ],
    );
  });

  it('BAD CALL - rejects a non-repeated field given twice', () => {
    assert.deepEqual(problems('name: "a"\nname: "b"\nresponse_cache {}\nresponse_cache {}'), [
      "simple/config.pbtxt:2:1: duplicate field 'name' in ModelConfig (first set at 1:1); it is not repeated, so set it once",
      "simple/config.pbtxt:4:1: duplicate field 'response_cache' in ModelConfig (first set at 3:1); it is not repeated, so set it once",
    ]);
  });

  it('BAD CALL - rejects two members of one oneof', () => {
    assert.deepEqual(problems('dynamic_batching {}\nsequence_batching {}\nversion_policy { latest {} all {} }'), [
      "simple/config.pbtxt:2:1: field 'sequence_batching' conflicts with 'dynamic_batching': both belong to oneof 'scheduling_choice' in ModelConfig; set only one",
      "simple/config.pbtxt:3:28: field 'all' conflicts with 'latest': both belong to oneof 'policy_choice' in ModelVersionPolicy; set only one",
    ]);
  });

  it('BAD CALL - rejects a list for a non-repeated field', () => {
    assert.deepEqual(problems('name: ["a"]'), [
      "simple/config.pbtxt:1:1: field 'name' is not repeated; give one value, not a list",
    ]);
  });

  it('BAD CALL - reports an unterminated string', () => {
    assert.deepEqual(problems('name: "abc\nplatform: "x"'), [
      'simple/config.pbtxt:1:7: unterminated string: missing closing quote before end of line',
    ]);
  });

  it('BAD CALL - reports an unterminated brace at the brace that is never closed', () => {
    assert.deepEqual(problems('input {\n  name: "a"\n  reshape { shape: [1]\n}\n'), [
      "simple/config.pbtxt:1:7: unterminated message ModelConfig.input[0]: '{' is never closed with '}'",
    ]);
  });

  it('BAD CALL - reports syntax errors: missing colon, stray brace, bad list, bad escape', () => {
    assert.deepEqual(problems('name "a"'), ["simple/config.pbtxt:1:6: expected ':' after 'name', got \"a\""]);
    assert.deepEqual(problems('}'), ["simple/config.pbtxt:1:1: expected a field name in ModelConfig, got '}'"]);
    assert.deepEqual(problems('input { dims: [1 2] }'), [
      "simple/config.pbtxt:1:18: expected ',' or ']' in list, got \"2\"",
    ]);
    assert.deepEqual(problems('name: "\\q"'), ["simple/config.pbtxt:1:9: unknown escape '\\q' in string"]);
    assert.deepEqual(problems('max_batch_size: 12ab'), ["simple/config.pbtxt:1:17: invalid number '12ab'"]);
  });

  it('BAD CALL - parseModelConfigOrThrow throws an InvalidArgError listing every problem', () => {
    assert.throws(
      () => parseModelConfigOrThrow('dimz: 1\nmax_batch_size: "x"', FILE),
      (err: unknown) =>
        err instanceof InvalidArgError &&
        err.message ===
          'invalid model configuration (2 problems):\n' +
            "simple/config.pbtxt:1:1: unknown field 'dimz' in ModelConfig\n" +
            'simple/config.pbtxt:2:17: expected an integer for ModelConfig.max_batch_size, got "x"',
    );
    assert.deepEqual(parseModelConfigOrThrow('name: "ok"', FILE), { name: 'ok' });
  });
});
