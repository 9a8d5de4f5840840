/**
 * A config that sets at least one field of every message in model_config.proto, shared by the printer
 * and JSON tests. (Not a test file itself; named so the test glob skips it.)
 */
export const EVERYTHING = `
name: "everything"
platform: "onnxruntime_onnx"
backend: "onnxruntime"
runtime: "libtriton_onnxruntime.so"
version_policy { specific { versions: [1, 3] } }
max_batch_size: 8
input [
  { name: "IN\\"0\\"\\n" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [3, -1, 224] reshape { shape: [] }
    is_shape_tensor: false allow_ragged_batch: true optional: true is_non_linear_format_io: false },
  { name: "IN1" data_type: TYPE_STRING dims: [1] }
]
output { name: "OUT" data_type: TYPE_BF16 dims: [-1] reshape { shape: [2, 2] } label_filename: "labels.txt"
         is_shape_tensor: true is_non_linear_format_io: true }
batch_input { kind: BATCH_ITEM_SHAPE_FLATTEN target_name: ["T"] data_type: TYPE_INT32 source_input: ["IN1"] }
batch_output { target_name: ["OUT"] kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: ["IN1"] }
optimization {
  graph { level: -1 }
  priority: PRIORITY_MAX
  cuda {
    graphs: true busy_wait_events: true output_copy_stream: true
    graph_spec { batch_size: 4 input { key: "IN1" value { dim: [1, 2] } }
                 graph_lower_bound { batch_size: 1 input { key: "IN1" value { dim: [1] } } } }
  }
  execution_accelerators {
    gpu_execution_accelerator [ { name: "tensorrt" parameters { key: "precision_mode" value: "FP16" } } ]
    cpu_execution_accelerator { name: "openvino" }
  }
  input_pinned_memory { enable: false }
  output_pinned_memory { enable: true }
  gather_kernel_buffer_threshold: 3
  eager_batching: true
}
dynamic_batching {
  preferred_batch_size: [4, 8]
  max_queue_delay_microseconds: 9007199254740991
  preserve_ordering: true
  priority_levels: 2
  default_priority_level: 1
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 100 allow_timeout_override: true max_queue_size: 16 }
  priority_queue_policy { key: 2 value { timeout_action: REJECT } }
}
instance_group [
  { name: "g" kind: KIND_GPU count: 2 gpus: [0, 1] profile: ["0"] passive: true host_policy: "numa0"
    rate_limiter { resources [ { name: "R" global: true count: 4 } ] priority: 2 }
    secondary_devices { kind: KIND_NVDLA device_id: 1 } }
]
default_model_filename: "model.onnx"
cc_model_filenames { key: "8.0" value: "a100.plan" }
metric_tags { key: "team" value: "ml" }
parameters { key: "intra_op_thread_count" value { string_value: "0" } }
model_warmup {
  name: "w" batch_size: 2 count: 3
  inputs { key: "IN0" value { data_type: TYPE_FP32 dims: [3, 4, 224] random_data: true } }
  inputs { key: "IN1" value { data_type: TYPE_STRING dims: [1] input_data_file: "raw_in1" } }
}
model_operations { op_library_filename: ["libcustom.so"] }
model_transaction_policy { decoupled: false }
model_repository_agents { agents { name: "checksum" parameters { key: "MD5:1/model.onnx" value: "abc" } } }
response_cache { enable: true }
model_metrics { metric_control { metric_identifier { family: "nv_inference_first_response_histogram_ms" }
                                 histogram_options { buckets: [0.5, 1, 2.5, inf] } } }
`;

/** The sequence_batching and ensemble_scheduling halves of the oneof that EVERYTHING can't also hold. */
export const SEQUENCE = `
max_batch_size: 4
sequence_batching {
  max_sequence_idle_microseconds: 1000000
  direct { max_queue_delay_microseconds: 10 minimum_slot_utilization: 0.5 }
  control_input [
    { name: "START" control { kind: CONTROL_SEQUENCE_START fp32_false_true: [0, 1] } },
    { name: "READY" control { kind: CONTROL_SEQUENCE_READY bool_false_true: [false, true] } },
    { name: "END" control { kind: CONTROL_SEQUENCE_END int32_false_true: [0, 1] } },
    { name: "CORRID" control { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } }
  ]
  state { input_name: "IS" output_name: "OS" data_type: TYPE_INT32 dims: [-1]
          initial_state { data_type: TYPE_INT32 dims: [1] data_file: "init" name: "i" }
          use_same_buffer_for_input_output: true use_growable_memory: true }
  iterative_sequence: true
}
`;

export const SEQUENCE_OLDEST = `
sequence_batching { oldest { max_candidate_sequences: 4 preferred_batch_size: [2] max_queue_delay_microseconds: 5 preserve_ordering: true } }
`;

export const ENSEMBLE = `
platform: "ensemble"
ensemble_scheduling {
  step { model_name: "a" model_version: -1 input_map { key: "x" value: "in" } output_map { key: "y" value: "mid" } model_namespace: "ns" }
  step { model_name: "b" model_version: 2 input_map { key: "x" value: "mid" } output_map { key: "y" value: "out" } }
  max_inflight_requests: 16
}
`;
