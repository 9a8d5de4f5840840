import { NereidError, UnavailableError } from '../../../core/errors.js';
import type { Logger } from '../../../core/logger.js';
import { ChildProcessHost } from './child.js';

/**
 * Engine processes shared by a model's instances, one per key (a GPU, a torch device): the TensorRT and pytorch
 * backends host every instance of a device in one process. A key whose process died gets a new one on the next
 * request for it, so instances restarted together after a crash all land in the same new process.
 *
 * Ownership: the processes belong to this object until `close`. Threading: main thread only.
 */
export class SharedHosts<K> {
  readonly #hosts = new Map<K, Promise<ChildProcessHost>>();
  readonly #start: (key: K, signal?: AbortSignal) => Promise<ChildProcessHost>;

  constructor(start: (key: K, signal?: AbortSignal) => Promise<ChildProcessHost>) {
    this.#start = start;
  }

  /** The live process of `key`, starting one when there is none (or it died). */
  async get(key: K, signal?: AbortSignal): Promise<ChildProcessHost> {
    for (let existing = this.#hosts.get(key); existing !== undefined; existing = this.#hosts.get(key)) {
      const h = await existing.catch(() => undefined);
      if (h !== undefined && h.alive) return h;
      if (this.#hosts.get(key) === existing) this.#hosts.delete(key);
    }
    const started = this.#start(key, signal);
    this.#hosts.set(key, started);
    return started;
  }

  /** Closes every process (each gets `graceMs` to end its instances). */
  async close(graceMs: number): Promise<void> {
    const all = await Promise.all([...this.#hosts.values()].map((p) => p.catch(() => undefined)));
    this.#hosts.clear();
    await Promise.all(all.map((h) => h?.close(graceMs) ?? Promise.resolve()));
  }
}

/** What starting a Python engine process needs. */
export interface EngineProcessSpec {
  /** Names the process in logs and errors ('tensorrt process'). */
  kind: string;
  python: { executable: string; env?: NodeJS.ProcessEnv; source: string };
  /** Shared-memory segment names start with this (one per process). */
  shmPrefix: string;
  options: { shmDefaultByteSize: number; shmGrowthByteSize: number; startTimeoutMs: number };
  logger: Logger;
  /** The command that installs what the interpreter lacks (said when numpy is missing). */
  setup: string;
  /** After `-m nereid_python` (the python stub's `--spin-us`). */
  args?: readonly string[];
}

/** Starts `python -m nereid_python`; an interpreter without numpy is UNAVAILABLE naming the set-up command. */
export function startEngineProcess(spec: EngineProcessSpec, signal?: AbortSignal): Promise<ChildProcessHost> {
  return ChildProcessHost.start(
    {
      kind: spec.kind,
      command: spec.python.executable,
      args: ['-m', 'nereid_python', ...(spec.args ?? [])],
      env: spec.python.env,
      shm: {
        prefix: spec.shmPrefix,
        defaultByteSize: spec.options.shmDefaultByteSize,
        growthByteSize: spec.options.shmGrowthByteSize,
      },
      startTimeoutMs: spec.options.startTimeoutMs,
      logger: spec.logger,
    },
    signal,
  ).catch((e: unknown) => {
    const err = NereidError.from(e);
    if (/No module named 'numpy'/.test(err.message)) {
      throw new UnavailableError(
        `python '${spec.python.executable}' (from ${spec.python.source}) has no numpy: run '${spec.setup}'`,
        { cause: e },
      );
    }
    throw err;
  });
}
