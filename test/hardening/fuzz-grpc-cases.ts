/** gRPC cases for the hardening fuzz: well-formed requests the mutations start from. */

const range16 = Array.from({ length: 16 }, (_, i) => i);
const raw16 = Buffer.from(new Int32Array(range16).buffer);
export const GRPC_TEMPLATES: [string, object][] = [
  [
    'ModelInfer',
    {
      model_name: 'simple',
      id: 'g',
      parameters: { priority: { int64_param: '0' } },
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: ['1', '16'] },
        { name: 'INPUT1', datatype: 'INT32', shape: ['1', '16'] },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { classification: { int64_param: '2' } } }],
      raw_input_contents: [raw16, raw16],
    },
  ],
  [
    'ModelInfer',
    {
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: ['1', '16'], contents: { int_contents: range16 } },
        {
          name: 'INPUT1',
          datatype: 'INT32',
          shape: ['1', '16'],
          parameters: {
            shared_memory_region: { string_param: 'fuzz_in' },
            shared_memory_byte_size: { int64_param: '64' },
          },
        },
      ],
    },
  ],
  ['ModelMetadata', { name: 'simple', version: '1' }],
  ['ModelConfig', { name: 'classifier' }],
  ['ModelStatistics', { name: 'simple' }],
  ['RepositoryIndex', { ready: true }],
  ['LogSettings', { settings: { log_verbose_level: { uint32_param: 0 } } }],
  ['TraceSetting', { model_name: 'simple', settings: { trace_rate: { value: ['1000'] } } }],
  ['SystemSharedMemoryRegister', { name: 'fuzz_g', key: '/nereid-fuzz-missing', offset: '0', byte_size: '64' }],
  ['SystemSharedMemoryStatus', { name: 'fuzz_g' }],
  ['RepositoryModelLoad', { model_name: 'fuzzmodel', parameters: { config: { string_param: '{}' } } }],
];
