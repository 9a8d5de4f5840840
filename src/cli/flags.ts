import { InvalidArgError } from '../core/errors.js';
import { boolWord } from '../core/bool-word.js';
import { editDistance } from '../config/config-error.js';
import { SERVER_DEFAULTS } from '../server/defaults.js';
import type { FlagSpec } from './flag-spec.js';

export type { FlagSpec } from './flag-spec.js';
import { TRITON_FLAGS } from './triton-flags.js';
import { DEFAULT_MAX_RESPONSE_POOL_SIZE } from '../protocol/grpc/server.js';
import { HTTP_LIMIT_DEFAULTS } from '../protocol/http/server.js';
import { DEFAULT_MAX_RESPONSE_BYTES } from '../protocol/kserve/response-size.js';
import {
  DEFAULT_STREAM_MAX_PENDING_BYTES,
  DEFAULT_STREAM_STALL_TIMEOUT_SECS,
} from '../protocol/kserve/stream-budget.js';

/**
 * `nereid serve` flags, Triton's names (the rest of Triton's list: triton-flags.ts). `noEffect` marks a flag that
 * is accepted for compatibility but means nothing in Nereid: it is parsed and checked by kind, and start-up logs
 * one line saying it has no effect, and why.
 */
export const FLAGS = {
  'model-repository': { kind: 'list', help: 'Model repository folder (repeatable).', alias: 'model-store' },
  'http-port': { kind: 'int', help: 'HTTP port (0 picks a free one).', default: SERVER_DEFAULTS.httpPort },
  'http-address': { kind: 'string', help: 'HTTP bind address.', default: '0.0.0.0' },
  'http-max-input-size': {
    kind: 'int',
    help: 'Largest HTTP request body, bytes (also after decompression).',
    default: 64 * 1024 * 1024,
  },
  'allow-http': { kind: 'bool', help: 'Serve HTTP.', default: true },
  'http-thread-count': {
    kind: 'int',
    help: 'Front-end threads serving HTTP and gRPC (1: the main thread serves them itself). Default: one per core from 4 cores, else 1.',
  },
  'reuse-http-port': {
    kind: 'bool',
    help: 'Listen with SO_REUSEPORT: other servers may share the HTTP port.',
    default: false,
  },
  'reuse-grpc-port': {
    kind: 'bool',
    help: 'Listen with SO_REUSEPORT: other servers may share the gRPC port.',
    default: false,
  },
  'max-response-bytes': {
    kind: 'int',
    help: "Nereid's own: largest inference response (HTTP body or gRPC message), bytes; refused with 400 before it is built.",
    default: DEFAULT_MAX_RESPONSE_BYTES,
  },
  'http-max-connections': {
    kind: 'int',
    help: "Nereid's own: open HTTP connections at most.",
    default: HTTP_LIMIT_DEFAULTS.maxConnections,
  },
  'http-headers-timeout-secs': {
    kind: 'int',
    help: "Nereid's own: seconds for a request's headers to arrive.",
    default: HTTP_LIMIT_DEFAULTS.headersTimeoutSecs,
  },
  'http-request-timeout-secs': {
    kind: 'int',
    help: "Nereid's own: seconds for a whole request, body included, to arrive (408 after).",
    default: HTTP_LIMIT_DEFAULTS.requestTimeoutSecs,
  },
  'http-restricted-api': {
    kind: 'list',
    help:
      'Restrict HTTP APIs to requests with a header: <api>[,<api>...]:<key>=<value> (repeatable). APIs: health, ' +
      'metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging.',
  },
  // CORS (protocol/http/cors.ts): Nereid's own, Triton has none.
  'http-cors-allow-origin': {
    kind: 'list',
    help:
      "Nereid's own: let pages of this origin call the HTTP APIs: [<api>[,<api>...]=]<origin> (repeatable; default " +
      'APIs health, metadata, model-config, inference, statistics; * = any origin, without credentials). Off by default.',
  },
  console: {
    kind: 'bool',
    help: 'Serve the web console at /console on the HTTP port (its actions use the same HTTP APIs).',
    default: true,
  },
  'grpc-port': { kind: 'int', help: 'gRPC port.', default: SERVER_DEFAULTS.grpcPort },
  'grpc-address': { kind: 'string', help: 'gRPC bind address.', default: '0.0.0.0' },
  'allow-grpc': { kind: 'bool', help: 'Serve gRPC.', default: true },
  'grpc-max-input-size': {
    kind: 'int',
    help: "Nereid's own: largest gRPC message received, bytes, after decompression (default: --http-max-input-size; Triton: 2 GiB).",
  },
  'grpc-max-response-pool-size': {
    kind: 'int',
    help: 'Responses pending per ModelStreamInfer stream before the server stops reading its requests (Triton: unbounded).',
    default: DEFAULT_MAX_RESPONSE_POOL_SIZE,
  },
  'stream-max-pending-bytes': {
    kind: 'int',
    help: "Nereid's own: bytes of responses a stream (ModelStreamInfer, generate_stream) may hold that its client has not taken; past it the stream ends with RESOURCE_EXHAUSTED and its requests are cancelled. A Python model's send() waits long before (8 responses or 8 MiB per request).",
    default: DEFAULT_STREAM_MAX_PENDING_BYTES,
  },
  'stream-stall-timeout-secs': {
    kind: 'int',
    help: "Nereid's own: seconds a stream may hold responses its client takes none of; then it ends with RESOURCE_EXHAUSTED and its requests are cancelled.",
    default: DEFAULT_STREAM_STALL_TIMEOUT_SECS,
  },
  'grpc-restricted-protocol': {
    kind: 'list',
    help: 'Restrict gRPC APIs to calls with the header triton-grpc-protocol-<key>: <api>[,<api>...]:<key>=<value>.',
  },
  'metrics-port': { kind: 'int', help: 'Prometheus metrics port.', default: SERVER_DEFAULTS.metricsPort },
  'metrics-address': { kind: 'string', help: 'Metrics bind address.' },
  'allow-metrics': { kind: 'bool', help: 'Serve metrics.', default: true },
  'allow-cpu-metrics': { kind: 'bool', help: 'Report CPU utilization and memory.', default: true },
  'allow-gpu-metrics': {
    kind: 'bool',
    help: 'Report GPU utilization, memory, power and energy from NVML (nothing where no NVIDIA driver is found).',
    default: true,
  },
  'metrics-config': { kind: 'list', help: 'Metrics option <key>=<value>.' },
  'metrics-interval-ms': { kind: 'int', help: 'Metrics refresh interval.', default: 2000 },
  'backend-config': {
    kind: 'list',
    help: 'Backend settings <backend>,<key>=<value>[,<key>=<value>...], or <key>=<value> for every backend (repeatable); backends onnxruntime, tensorrt, pytorch, python (docs/<backend>-backend.md lists their keys).',
  },
  'tensorrt-plan-cache': {
    kind: 'string',
    help: "Nereid's own: the folder of TensorRT plans built from model.onnx files (the same as --backend-config=tensorrt,plan-cache-directory=DIR; default ~/.cache/nereid/tensorrt/plans).",
  },
  'strict-model-config': {
    kind: 'bool',
    help: 'Deprecated: true disables auto-complete.',
    default: false,
  },
  'disable-auto-complete-config': {
    kind: 'bool',
    switch: true,
    help: 'Do not complete configs from model files.',
    default: false,
  },
  'exit-on-error': {
    kind: 'bool',
    help: 'Fail start-up when a model fails to load.',
    default: SERVER_DEFAULTS.exitOnError,
  },
  'strict-readiness': {
    kind: 'bool',
    help: 'Ready only when every model is ready.',
    default: SERVER_DEFAULTS.strictReadiness,
  },
  'exit-timeout-secs': {
    kind: 'int',
    help: 'Seconds to drain in-flight requests on shutdown.',
    default: SERVER_DEFAULTS.exitTimeoutSecs,
  },
  id: {
    kind: 'string',
    help: "Server name in metadata (Triton's default; Triton's own examples check it).",
    default: SERVER_DEFAULTS.id,
  },
  'model-control-mode': {
    kind: 'string',
    help: 'none | poll | explicit.',
    default: SERVER_DEFAULTS.modelControlMode,
    choices: ['none', 'poll', 'explicit'],
  },
  'repository-poll-secs': {
    kind: 'int',
    help: 'Poll interval (poll mode).',
    default: SERVER_DEFAULTS.repositoryPollSecs,
  },
  'load-model': {
    kind: 'list',
    help: 'Model to load at start (explicit mode; * = all).',
  },
  'allow-code-in-load-requests': {
    kind: 'bool',
    help: 'Let load requests carry code (model.py, .pt, native libraries); the repository API then runs what callers send.',
    default: false,
  },
  'log-verbose': { kind: 'int', help: 'Verbose logging level (0 = off).', default: 0 },
  'log-info': { kind: 'bool', help: 'Log info messages.', default: true },
  'log-warning': { kind: 'bool', help: 'Log warnings.', default: true },
  'log-error': { kind: 'bool', help: 'Log errors.', default: true },
  'log-format': {
    kind: 'string',
    help:
      'default | ISO8601 (time format; formatted lines on a terminal, JSON lines elsewhere) | json (JSON lines ' +
      'always) | pretty (formatted lines always).',
    default: 'default',
    choices: ['default', 'ISO8601', 'json', 'pretty'],
  },
  'log-file': { kind: 'string', help: 'Write logs to this file instead of stderr.' },
  'trace-config': {
    kind: 'list',
    help:
      'Trace setting [<mode>,]<key>=<value>: mode (triton|opentelemetry), level (OFF|TIMESTAMPS), rate, count, ' +
      'log-frequency; triton,file=<path>; opentelemetry,url=<host:port/v1/traces>, opentelemetry,resource=<k>=<v>, ' +
      'opentelemetry,bsp_max_queue_size|bsp_schedule_delay|bsp_max_export_batch_size=<n>.',
  },
  'trace-file': { kind: 'string', help: 'Deprecated: use --trace-config triton,file=<path>.' },
  'trace-level': { kind: 'string', help: 'Deprecated: use --trace-config triton,level=<level>.' },
  'trace-rate': { kind: 'int', help: 'Deprecated: use --trace-config triton,rate=<n>.' },
  'trace-count': { kind: 'int', help: 'Deprecated: use --trace-config triton,count=<n>.' },
  'grpc-use-ssl': { kind: 'bool', help: 'gRPC TLS.', default: false },
  'grpc-use-ssl-mutual': { kind: 'bool', help: 'gRPC mutual TLS.', default: false },
  'grpc-server-cert': { kind: 'string', help: 'gRPC server certificate.' },
  'grpc-server-key': { kind: 'string', help: 'gRPC server key.' },
  'grpc-root-cert': { kind: 'string', help: 'gRPC root certificate.' },
  'grpc-infer-response-compression-level': {
    kind: 'string',
    help: 'none | low | medium | high.',
    choices: ['none', 'low', 'medium', 'high'],
  },
  'grpc-keepalive-time': { kind: 'int', help: 'ms between keepalive pings on an idle connection.', default: 7200000 },
  'grpc-keepalive-timeout': { kind: 'int', help: 'ms to wait for a keepalive ack.', default: 20000 },
  'grpc-keepalive-permit-without-calls': {
    kind: 'bool',
    help: 'Accepted; grpc-js enforces no client-ping policy.',
    default: false,
  },
  'grpc-http2-max-pings-without-data': { kind: 'int', help: 'Accepted; not enforced by grpc-js.', default: 2 },
  'grpc-http2-min-recv-ping-interval-without-data': {
    kind: 'int',
    help: 'Accepted; not enforced by grpc-js.',
    default: 300000,
  },
  'grpc-http2-max-ping-strikes': { kind: 'int', help: 'Accepted; not enforced by grpc-js.', default: 2 },
  'grpc-max-connection-age': { kind: 'int', help: 'ms before a connection is closed (0 = never).' },
  'grpc-max-connection-age-grace': { kind: 'int', help: 'ms of grace after the maximum age.' },
  'cache-config': {
    kind: 'list',
    help: 'Response cache <cache>,<key>=<value>: local,size=<bytes> (models opt in with response_cache { enable: true }).',
  },
  'response-cache-byte-size': { kind: 'int', help: 'Deprecated: use --cache-config=local,size=<bytes>.' },
  'allow-client-shm': {
    kind: 'bool',
    help: 'Let clients register system and CUDA shared-memory regions for inputs and outputs.',
    default: false,
  },
  ...TRITON_FLAGS,
  // Triton's rate limiter; values are checked in rate-limit-flags.ts.
  'rate-limit': {
    kind: 'string',
    help: 'off | execution_count: instances run only while the resources their instance group lists are free.',
  },
  'rate-limit-resource': {
    kind: 'list',
    help: 'Rate limiter resource <name>:<count>[:<device>] (repeatable; default: the largest count a model asks for).',
  },
} as const satisfies Record<string, FlagSpec>;

export type FlagName = keyof typeof FLAGS;
type ValueOf<K> = K extends 'bool' ? boolean : K extends 'int' ? number : K extends 'list' ? string[] : string;
type Spec<N extends FlagName> = (typeof FLAGS)[N];
/**
 * Each flag's parsed value, typed from the table: a list or a flag with a default always has one; others may be
 * undefined. The CLI reads `values['http-port']` as a number with no cast.
 */
type Value<N extends FlagName> = Spec<N> extends { choices: readonly (infer C)[] } ? C : ValueOf<Spec<N>['kind']>;
export type FlagValues = {
  [N in FlagName]: Spec<N> extends { kind: 'list' } | { default: unknown } ? Value<N> : Value<N> | undefined;
};

function parseBool(name: string, v: string): boolean {
  const b = boolWord(v);
  if (b === undefined) throw new InvalidArgError(`--${name} expects true or false, got '${v}'`);
  return b;
}

function checkForm(name: string, spec: FlagSpec, value: string): void {
  if (spec.form && !spec.form.pattern.test(value)) {
    throw new InvalidArgError(`--${name} expects ${spec.form.shape}, got '${value}'`);
  }
}

/** Parses argv (after the sub-command). Returns the values with defaults and which flags were given. */
export function parseFlags(argv: readonly string[]): { values: FlagValues; given: Set<string> } {
  const specs = FLAGS as Record<string, FlagSpec>;
  const aliases = new Map(Object.entries(specs).flatMap(([n, s]) => (s.alias ? [[s.alias, n] as const] : [])));
  const values: Record<string, string | boolean | number | string[] | undefined> = {};
  for (const [n, s] of Object.entries(specs)) values[n] = s.kind === 'list' ? [] : s.default;
  const given = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new InvalidArgError(`unexpected argument '${arg}'; flags start with --`);
    const eq = arg.indexOf('=');
    const raw = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    const name = aliases.get(raw) ?? raw;
    const spec = specs[name];
    if (!spec) {
      const best = Object.keys(specs).sort((a, b) => editDistance(raw, a) - editDistance(raw, b))[0];
      throw new InvalidArgError(
        `unknown option '--${raw}'${editDistance(raw, best) <= 3 ? `; did you mean '--${best}'?` : ''} (see nereid serve --help)`,
      );
    }
    let value: string | undefined = eq >= 0 ? arg.slice(eq + 1) : undefined;
    if (value === undefined) {
      const next = argv[i + 1];
      if (spec.kind === 'bool') {
        if (next !== undefined && /^(true|false|1|0|on|off|yes|no)$/i.test(next)) value = argv[++i];
        else value = 'true';
      } else {
        if (next === undefined || next.startsWith('--')) throw new InvalidArgError(`--${name} needs a value`);
        value = argv[++i];
      }
    }
    given.add(name);
    switch (spec.kind) {
      case 'bool':
        values[name] = parseBool(name, value);
        break;
      case 'int': {
        const n = Number(value);
        if (!/^-?[0-9]+$/.test(value) || !Number.isSafeInteger(n)) {
          throw new InvalidArgError(`--${name} expects an integer, got '${value}'`);
        }
        values[name] = n;
        break;
      }
      case 'list':
        checkForm(name, spec, value);
        (values[name] as string[]).push(value);
        break;
      default:
        checkForm(name, spec, value);
        if (spec.choices && !spec.choices.includes(value)) {
          throw new InvalidArgError(`--${name} must be one of ${spec.choices.join(', ')}; got '${value}'`);
        }
        values[name] = value;
    }
  }
  // The one cast: the loop above filled every flag with a value of its kind (or its default).
  return { values: values as FlagValues, given };
}

export function helpText(): string {
  const lines = Object.entries(FLAGS as Record<string, FlagSpec>).map(([n, s]) => {
    const value = s.switch ? '' : s.kind === 'bool' ? '=<bool>' : s.kind === 'int' ? '=<int>' : '=<value>';
    const def = s.default !== undefined && !Array.isArray(s.default) ? ` (default ${String(s.default)})` : '';
    const none = s.noEffect ? ` [accepted; no effect: ${s.noEffect}]` : '';
    return `  --${n}${value}\n      ${s.help}${def}${none}`;
  });
  return `Usage: nereid serve --model-repository <dir> [options]\n\nServes a Triton model repository over Triton's KServe v2 HTTP and gRPC protocols: ONNX models (onnxruntime),\nTensorRT plans (tensorrt), TorchScript (pytorch) and Python models (python). Backend settings: --backend-config.\n\nOptions:\n${lines.join('\n')}\n  --help\n      Show this help.\n`;
}
