import type { FlagSpec } from './flag-spec.js';

/**
 * The rest of Triton 2.x's `tritonserver` flags, so that a Triton command line starts Nereid unchanged. Those with
 * a meaning here are implemented; the others are parsed and checked by kind, and start-up logs one line per flag
 * given saying it has no effect and why (`noEffect`). Values that name GPUs or sizes keep Triton's forms.
 */
export const TRITON_FLAGS = {
  'model-load-thread-count': {
    kind: 'int',
    help: 'Models loading at once (the rest wait their turn).',
    default: 4,
  },
  'model-config-name': {
    kind: 'string',
    help: "A model's config is configs/<name>.pbtxt in its folder where that file exists, else config.pbtxt.",
  },
  'trace-log-frequency': { kind: 'int', help: 'Deprecated: use --trace-config triton,log-frequency=<n>.' },
  'model-load-retry-count': {
    kind: 'int',
    help: 'Times a failed model load is tried again.',
    default: 0,
  },
  'model-namespacing': {
    kind: 'bool',
    help: 'Triton: the same model name in several repositories.',
    noEffect: 'model names are unique across the repositories (a name found twice is not served)',
  },
  'enable-peer-access': {
    kind: 'bool',
    help: 'Triton: CUDA peer access between GPUs.',
    noEffect: 'Nereid copies no tensor from one GPU to another',
  },
  'pinned-memory-pool-byte-size': {
    kind: 'int',
    help:
      'Page-locked host memory per GPU for the outputs of onnxruntime KIND_GPU instances, reused across requests ' +
      '(0: none; a request waits when it is all lent).',
    default: 268435456,
  },
  'cuda-memory-pool-byte-size': {
    form: { pattern: /^\d+:\d+$/, shape: '<gpu>:<bytes>' },
    kind: 'list',
    help: 'Triton: <gpu>:<bytes>, the CUDA memory pool per GPU (repeatable).',
    noEffect: 'Nereid keeps no CUDA memory pool; each engine allocates its device memory itself',
  },
  'cuda-virtual-address-size': {
    form: { pattern: /^\d+:\d+$/, shape: '<gpu>:<bytes>' },
    kind: 'list',
    help: 'Triton: <gpu>:<bytes>, virtual address space for growable implicit state (repeatable).',
    noEffect: 'implicit sequence state is held by the sequence batcher, not in a CUDA virtual address range',
  },
  'buffer-manager-thread-count': {
    kind: 'int',
    help: 'Triton: threads copying request buffers.',
    noEffect: 'inputs are gathered on the thread that runs the batch; there is no copy thread pool',
  },
  'backend-directory': {
    kind: 'string',
    help: 'Triton: where backend libraries are found.',
    noEffect: "Nereid's backends are built in (onnxruntime, tensorrt, pytorch, python, identity)",
  },
  'repoagent-directory': {
    kind: 'string',
    help: 'Triton: where repository agent libraries are found.',
    noEffect: 'Nereid loads no repository agents',
  },
  'cache-directory': {
    kind: 'string',
    help: 'Triton: where cache libraries are found.',
    noEffect: 'the local response cache is built in (--cache-config=local,size=<bytes>); no cache library is loaded',
  },
  'host-policy': {
    form: { pattern: /^[^,]+,(numa-node|cpu-cores)=.+$/, shape: '<name>,numa-node=<id> or <name>,cpu-cores=<list>' },
    kind: 'list',
    help: 'Triton: <name>,<setting>=<value> NUMA and CPU-core placement (repeatable).',
    noEffect: 'Nereid does not pin its threads to NUMA nodes or cores; use numactl or taskset on the process',
  },
  'model-load-gpu-limit': {
    form: { pattern: /^\d+:(0(\.\d+)?|1(\.0*)?|\.\d+)$/, shape: '<gpu>:<fraction from 0 to 1>' },
    kind: 'list',
    help: 'Triton: <gpu>:<fraction>, refuse loads past this share of GPU memory (repeatable).',
    noEffect: 'Nereid does not account GPU memory per load; a load that does not fit fails with the engine error',
  },
  'min-supported-compute-capability': {
    form: { pattern: /^\d+(\.\d+)?$/, shape: '<major>.<minor>' },
    kind: 'string',
    help: 'Triton: GPUs below this compute capability are not used.',
    noEffect: 'every visible GPU is offered to the engines, which refuse a device their build cannot run on',
  },
  'grpc-infer-thread-count': {
    kind: 'int',
    help: 'Triton: gRPC handler threads.',
    noEffect: 'gRPC is served by the front-end threads (--http-thread-count)',
  },
  'grpc-infer-allocation-pool-size': {
    kind: 'int',
    help: 'Triton: request/response objects kept for reuse.',
    noEffect: 'Nereid keeps no pool of request objects (the garbage collector reclaims them)',
  },
  'http-header-forward-pattern': {
    kind: 'string',
    help: 'HTTP request headers whose name matches this regular expression (case-insensitive) become string parameters of the inference request.',
  },
  'grpc-header-forward-pattern': {
    kind: 'string',
    help: 'gRPC metadata whose key matches this regular expression (case-insensitive) become string parameters of the inference request.',
  },
  'allow-sagemaker': {
    kind: 'bool',
    help: 'Triton: the SageMaker endpoint.',
    default: false,
    noEffect: 'Nereid has no SageMaker endpoint',
  },
  'sagemaker-port': { kind: 'int', help: 'Triton: SageMaker port.', noEffect: 'Nereid has no SageMaker endpoint' },
  'sagemaker-safe-port-range': {
    form: { pattern: /^\d+-\d+$/, shape: '<low>-<high>' },
    kind: 'string',
    help: 'Triton: <lo>-<hi>.',
    noEffect: 'Nereid has no SageMaker endpoint',
  },
  'sagemaker-thread-count': {
    kind: 'int',
    help: 'Triton: SageMaker threads.',
    noEffect: 'Nereid has no SageMaker endpoint',
  },
  'allow-vertex-ai': {
    kind: 'bool',
    help: 'Triton: the Vertex AI endpoint.',
    default: false,
    noEffect: 'Nereid has no Vertex AI endpoint',
  },
  'vertex-ai-port': { kind: 'int', help: 'Triton: Vertex AI port.', noEffect: 'Nereid has no Vertex AI endpoint' },
  'vertex-ai-thread-count': {
    kind: 'int',
    help: 'Triton: Vertex AI threads.',
    noEffect: 'Nereid has no Vertex AI endpoint',
  },
  'vertex-ai-default-model': {
    kind: 'string',
    help: 'Triton: the model Vertex AI requests go to.',
    noEffect: 'Nereid has no Vertex AI endpoint',
  },
} as const satisfies Record<string, FlagSpec>;
