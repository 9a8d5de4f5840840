#!/usr/bin/env node
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { InvalidArgError, NereidError } from '../core/errors.js';
import type { GrpcTlsOptions } from '../protocol/grpc/index.js';
import { NEREID_VERSION } from '../core/version.js';
import { FLAGS, helpText, parseFlags, type FlagSpec, type FlagValues } from './flags.js';
import { parseBackendConfig, withTensorRTPlanCache } from './backend-config-flag.js';
import { parseCacheConfig, parseTraceConfig } from './flag-settings.js';
import { parseRateLimitMode, parseRateLimitResources } from './rate-limit-flags.js';
import { serve, type RunningNereid, type ServeOptions } from '../index.js';
import type { Logger } from '../core/logger.js';
import { cliLogging } from './log-output.js';
import { announceReady } from './ready-report.js';
import { defaultThreadCount } from '../frontend/pool.js';

/** `--grpc-use-ssl[-mutual]` with the PEM files named by `--grpc-server-cert`, `--grpc-server-key`, `--grpc-root-cert`. */
async function grpcTls(v: FlagValues): Promise<GrpcTlsOptions | undefined> {
  const mutual = v['grpc-use-ssl-mutual'];
  if (!v['grpc-use-ssl'] && !mutual) return undefined;
  const read = async (
    flag: 'grpc-server-cert' | 'grpc-server-key' | 'grpc-root-cert',
    required: boolean,
  ): Promise<Buffer | undefined> => {
    const path = v[flag];
    if (path === undefined) {
      if (required) throw new InvalidArgError(`--grpc-use-ssl needs --${flag}=<PEM file>`);
      return undefined;
    }
    return readFile(path).catch((err: Error) => {
      throw new InvalidArgError(`--${flag}: cannot read '${path}': ${err.message}`);
    });
  };
  return {
    cert: (await read('grpc-server-cert', true)) as Buffer,
    key: (await read('grpc-server-key', true)) as Buffer,
    rootCert: await read('grpc-root-cert', mutual),
    mutual,
  };
}

/** `nereid serve`'s flags as serve()'s options (each flag read with its own type: flags.ts's table). */
async function serveOptionsFrom(v: FlagValues, repositories: string[]): Promise<ServeOptions> {
  return {
    repositories,
    httpPort: v['http-port'],
    httpAddress: v['http-address'],
    httpMaxInputSize: v['http-max-input-size'],
    allowHttp: v['allow-http'],
    httpThreadCount: v['http-thread-count'] ?? defaultThreadCount(availableParallelism()),
    reuseHttpPort: v['reuse-http-port'],
    reuseGrpcPort: v['reuse-grpc-port'],
    httpRestrictedApi: v['http-restricted-api'],
    httpHeaderForwardPattern: v['http-header-forward-pattern'],
    grpcHeaderForwardPattern: v['grpc-header-forward-pattern'],
    httpCorsAllowOrigin: v['http-cors-allow-origin'],
    maxResponseBytes: v['max-response-bytes'],
    allowClientShm: v['allow-client-shm'],
    httpMaxConnections: v['http-max-connections'],
    httpHeadersTimeoutSecs: v['http-headers-timeout-secs'],
    httpRequestTimeoutSecs: v['http-request-timeout-secs'],
    grpcMaxInputSize: v['grpc-max-input-size'],
    grpcMaxResponsePoolSize: v['grpc-max-response-pool-size'],
    streamMaxPendingBytes: v['stream-max-pending-bytes'],
    streamStallTimeoutSecs: v['stream-stall-timeout-secs'],
    grpcRestrictedProtocol: v['grpc-restricted-protocol'],
    backendConfig: withTensorRTPlanCache(parseBackendConfig(v['backend-config']), v['tensorrt-plan-cache']),
    autoComplete: !v['disable-auto-complete-config'] && !v['strict-model-config'],
    strictReadiness: v['strict-readiness'],
    exitOnError: v['exit-on-error'],
    id: v.id,
    modelControlMode: v['model-control-mode'],
    loadModels: v['load-model'],
    repositoryPollSecs: v['repository-poll-secs'],
    modelLoadThreadCount: v['model-load-thread-count'],
    pinnedMemoryPoolByteSize: v['pinned-memory-pool-byte-size'],
    modelConfigName: v['model-config-name'],
    modelLoadRetryCount: v['model-load-retry-count'],
    allowCodeInLoadRequests: v['allow-code-in-load-requests'],
    trace: parseTraceConfig(v),
    responseCacheBytes: parseCacheConfig(v),
    rateLimit: {
      mode: parseRateLimitMode(v['rate-limit']),
      resources: parseRateLimitResources(v['rate-limit-resource']),
    },
    allowGrpc: v['allow-grpc'],
    grpcPort: v['grpc-port'],
    grpcAddress: v['grpc-address'],
    grpcKeepalive: {
      timeMs: v['grpc-keepalive-time'],
      timeoutMs: v['grpc-keepalive-timeout'],
      permitWithoutCalls: v['grpc-keepalive-permit-without-calls'],
      http2MaxPingsWithoutData: v['grpc-http2-max-pings-without-data'],
      http2MinRecvPingIntervalWithoutDataMs: v['grpc-http2-min-recv-ping-interval-without-data'],
      http2MaxPingStrikes: v['grpc-http2-max-ping-strikes'],
      maxConnectionAgeMs: v['grpc-max-connection-age'],
      maxConnectionAgeGraceMs: v['grpc-max-connection-age-grace'],
    },
    grpcCompressionLevel: v['grpc-infer-response-compression-level'],
    grpcTls: await grpcTls(v),
    exitTimeoutSecs: v['exit-timeout-secs'],
    allowMetrics: v['allow-metrics'],
    metricsPort: v['metrics-port'],
    metricsAddress: v['metrics-address'],
    metricsIntervalMs: v['metrics-interval-ms'],
    metricsConfig: v['metrics-config'],
    allowCpuMetrics: v['allow-cpu-metrics'],
    allowGpuMetrics: v['allow-gpu-metrics'],
    console: v.console,
  };
}

/**
 * What SIGTERM/SIGINT do (Triton's): readiness off, in-flight requests finish, a countdown each second, exit 0 once
 * closed, exit 1 past `--exit-timeout-secs`.
 */
function stopOnSignal(running: RunningNereid, logger: Logger, exitTimeout: number): (signal: string) => void {
  let stopping = false;
  return (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info(`${signal} received: not ready any more; waiting for in-flight requests to complete`);
    const deadline = Date.now() + exitTimeout * 1000;
    // Once a second, say what is still running (Triton's countdown); the deadline is never restarted.
    const countdown = setInterval(() => {
      const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
      logger.info(`Timeout ${left}: Found ${running.server.inflight} in-flight inference requests`);
      if (Date.now() >= deadline) {
        logger.error(`exit timeout of ${exitTimeout}s reached with ${running.server.inflight} requests in flight`);
        process.exit(1);
      }
    }, 1000);
    countdown.unref();
    running.close().then(
      () => {
        clearInterval(countdown);
        logger.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'error while stopping');
        process.exit(1);
      },
    );
  };
}

async function runServe(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(helpText());
    return 0;
  }
  const { values: v, given } = parseFlags(argv);
  const logging = cliLogging(
    {
      info: v['log-info'],
      warning: v['log-warning'],
      error: v['log-error'],
      verbose: v['log-verbose'],
      format: v['log-format'] === 'ISO8601' ? 'ISO8601' : 'default',
      file: v['log-file'] ?? '',
    },
    v['log-format'],
  );
  const logger = logging.logger;
  const repositories = v['model-repository'];
  if (repositories.length === 0) {
    process.stderr.write('nereid serve: --model-repository is required (see nereid serve --help)\n');
    return 2;
  }
  for (const name of given) {
    const spec = (FLAGS as Record<string, FlagSpec>)[name];
    // `--allow-sagemaker=false`, `--rate-limit=off`: nothing asked for, nothing to say.
    const off = v[name as keyof FlagValues] === false || v[name as keyof FlagValues] === 'off';
    if (spec.noEffect && !off) logger.warn(`--${name} has no effect in Nereid: ${spec.noEffect}`);
  }
  const started = process.hrtime.bigint();
  const running = await serve({ ...(await serveOptionsFrom(v, repositories)), consoleLogs: logging.recent, logger });
  // Handlers before the ready line: a supervisor that stops the server as soon as it reads it gets a drain, not
  // the default action of a signal with no listener yet (an exit with no code).
  const stop = stopOnSignal(running, logger, v['exit-timeout-secs']);
  // `on`, not `once`: a repeated signal (npm and the entry's re-run forward one the terminal also sent) is ignored.
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  announceReady(logging, running, Number(process.hrtime.bigint() - started) / 1e6, v.console);
  return -1;
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === '--version' || cmd === 'version') {
    process.stdout.write(`nereid ${NEREID_VERSION} (Node.js ${process.version})\n`);
    return 0;
  }
  if (cmd === undefined || cmd === '--help' || cmd === '-h' || cmd === 'help') {
    process.stdout.write(
      `nereid ${NEREID_VERSION}\n\nCommands:\n  serve     Serve a model repository (nereid serve --help)\n  model     Check a model folder and print its completed config (nereid model --help)\n  gpu       Set up and check the GPU libraries (nereid gpu --help)\n  convert   ONNX -> TensorRT plan (nereid convert --help)\n  tensorrt  Set up and check TensorRT (nereid tensorrt --help)\n  tune      Find the best config for a model on this machine (nereid tune --help)\n`,
    );
    return cmd === undefined ? 2 : 0;
  }
  if (cmd === 'gpu') {
    // Loaded only for this command: serving never pays for the set-up code.
    const { runGpuCommand } = await import('./gpu-command.js');
    return runGpuCommand(rest);
  }
  if (cmd === 'model') {
    const { runModelCommand } = await import('./model-command.js');
    return runModelCommand(rest);
  }
  if (cmd === 'convert') return (await import('./convert.js')).runConvert(rest);
  if (cmd === 'tensorrt') return (await import('./tensorrt-setup.js')).runTensorRTCommand(rest);
  if (cmd === 'tune') return (await import('./tune-command.js')).runTuneCommand(rest);
  if (cmd !== 'serve') {
    process.stderr.write(`nereid: unknown command '${cmd}' (commands: serve, model, gpu, convert, tensorrt, tune)\n`);
    return 2;
  }
  return runServe(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    const e = NereidError.from(err);
    process.stderr.write(`nereid: ${e.message}\n`);
    process.exitCode = e.code === 'INVALID_ARG' ? 2 : 1;
  },
);
