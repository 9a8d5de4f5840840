import { stat } from 'node:fs/promises';
import type { ModelConfig } from '../../../config/model-config.js';
import { InvalidArgError, NotFoundError, UnavailableError } from '../../../core/errors.js';
import type { DeviceMemory } from '../../../core/device.js';
import type { Logger } from '../../../core/logger.js';
import type {
  AutoCompleteContext,
  Backend,
  BackendDescriptor,
  EngineLoadContext,
  Instance,
  InstanceSpec,
  ModelHandle,
} from '../../contract.js';
import type { ChildProcessHost, ServiceHandler } from './child.js';
import { ProcessInstance } from './instance.js';
import { segmentPrefix, sweepStaleSegments } from './owner.js';
import { responseChecker } from './response-check.js';
import { SharedHosts, startEngineProcess, type EngineProcessSpec } from './shared-hosts.js';

/**
 * `processBackend(engine)`: a backend whose engine runs in Python child processes (python, pytorch, tensorrt), as
 * `inProcessBackend` and `workerBackend` are for engines in this process. The engine declares what is its own —
 * where its processes go, what a load resolves, the payload each instance's stub gets, an optional request guard —
 * and the runtime does, once for all of them: the model-file check and its wording, cancellation, the sweep of
 * dead servers' segments and this server's segment prefix, starting processes (one per instance or one per device,
 * shared), instance creation with its grace period and the check of every response against the config, and
 * closing every process at unload. docs/backends.md shows a new engine written this way.
 *
 * Threading: main thread only.
 */

/** What one load of an engine resolved, and how its processes and instances are made. */
export interface PreparedLoad {
  /** How the load's processes start (`python -m nereid_python`, plus `args`). */
  process: Omit<EngineProcessSpec, 'shmPrefix' | 'logger'> & { args?: readonly string[] };
  /** Child → host messages the transport does not handle (BLS calls), for every process of the load. */
  services?: ServiceHandler;
  /** How long an instance's finalize (and, at unload, each process) may take before it is killed. */
  graceMs: number;
  /** A call to the model's execute must return within this, or its process is killed; 0: no limit. */
  executeTimeoutMs?: number;
  /** The device key of an instance's process, for engines whose placement is 'device'. */
  deviceKey?(spec: InstanceSpec): string | number;
  /** What the instance's stub is given, and how its inputs and client device memory reach it. */
  instance(spec: InstanceSpec): {
    payload: unknown;
    inputLayout?: 'request' | 'name';
    deviceMemory?: DeviceMemory;
  };
  /** Wraps each instance (TensorRT's check of a request against the instance's profiles). */
  guard?(spec: InstanceSpec, inner: ProcessInstance): Instance;
  /** Called with the first process a load started (a log line naming the interpreter it runs on). */
  started?(host: ChildProcessHost): void;
}

export interface ProcessEngine extends BackendDescriptor {
  /** 'instance': a process per instance, gone with it; 'device': one per device key, hosting its instances. */
  readonly placement: 'instance' | 'device';
  /** Segment names start with this, then the server's owner token (owner.ts). */
  readonly shmPrefix: string;
  /** What the model file is, in messages ("TensorRT plan '…' does not exist"). */
  readonly modelFileKind: string;
  autoComplete(config: ModelConfig, ctx: AutoCompleteContext): Promise<ModelConfig>;
  /** Resolves everything one load needs (options, interpreter, plan facts); the model file exists by then. */
  prepare(ctx: EngineLoadContext & { logger: Logger }, signal?: AbortSignal): Promise<PreparedLoad>;
  close?(): Promise<void>;
}

/** The one wording of a model file that is missing or not a file. */
export async function checkModelFile(path: string, kind: string, model: string): Promise<void> {
  let st;
  try {
    st = await stat(path);
  } catch (e) {
    throw new NotFoundError(`model '${model}': ${kind} '${path}' does not exist`, { cause: e });
  }
  if (!st.isFile()) throw new InvalidArgError(`model '${model}': ${kind} '${path}' is not a file`);
}

export function processBackend(engine: ProcessEngine): Backend {
  let swept = false;
  const { placement, shmPrefix, modelFileKind, prepare, autoComplete, close, ...descriptor } = engine;
  return {
    ...descriptor,
    autoComplete: (config, ctx) => autoComplete.call(engine, config, ctx),
    ...(close ? { close: () => close.call(engine) } : {}),

    async load(ctx: EngineLoadContext & { logger: Logger }, signal?: AbortSignal): Promise<ModelHandle> {
      await checkModelFile(ctx.modelPath, modelFileKind, ctx.name);
      const prepared = await prepare.call(engine, ctx, signal);
      if (signal?.aborted) throw new UnavailableError(`load of model '${ctx.name}' was cancelled`);
      if (!swept) {
        // Segments of servers killed before they could remove them (the server sweeps at start too; this covers
        // a backend used on its own).
        swept = true;
        sweepStaleSegments();
      }
      const logger = ctx.logger;
      const check = responseChecker(ctx.config, ctx.name);
      let announced = false;
      const start = (log: Logger, sig?: AbortSignal): Promise<ChildProcessHost> =>
        startEngineProcess({ ...prepared.process, shmPrefix: segmentPrefix(shmPrefix), logger: log }, sig).then(
          (host) => {
            if (prepared.services) host.services = prepared.services;
            if (!announced) {
              announced = true;
              prepared.started?.(host);
            }
            return host;
          },
        );
      const shared = new SharedHosts<string | number>((key, sig) => start(logger.child({ device: key }), sig));
      const own = new Set<ChildProcessHost>();

      const hostFor = async (spec: InstanceSpec, sig?: AbortSignal): Promise<ChildProcessHost> => {
        if (placement === 'device') return shared.get(prepared.deviceKey?.(spec) ?? spec.device, sig);
        const host = await start(logger.child({ instance: spec.name }), sig);
        own.add(host);
        // `exited` never rejects.
        void host.exited.then(() => own.delete(host));
        return host;
      };

      return {
        async createInstance(spec: InstanceSpec, sig?: AbortSignal): Promise<Instance> {
          const what = prepared.instance(spec);
          const host = await hostFor(spec, sig);
          let inner: ProcessInstance;
          try {
            inner = await ProcessInstance.create(
              host,
              {
                name: spec.name,
                decoupled: ctx.config.model_transaction_policy?.decoupled === true,
                executeTimeoutMs: prepared.executeTimeoutMs ?? 0,
                destroyGraceMs: prepared.graceMs,
                ownsProcess: placement === 'instance',
                logger: logger.child({ instance: spec.name }),
                check,
                ...what,
              },
              sig,
            );
          } catch (e) {
            if (placement === 'instance') await host.close(1000);
            throw e;
          }
          return prepared.guard ? prepared.guard(spec, inner) : inner;
        },
        async unload(): Promise<void> {
          // Instances close their own processes; anything left (an instance never destroyed) goes now.
          await Promise.all([shared.close(prepared.graceMs), ...[...own].map((h) => h.close(prepared.graceMs))]);
        },
      };
    },
  };
}
