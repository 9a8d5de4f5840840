import { CancelledError } from '../../core/errors.js';

/**
 * One GPU's gate between CUDA graph captures and everything else onnxruntime does on that GPU. onnxruntime captures
 * in CUDA's global mode: while one instance captures, a synchronous CUDA call from any other thread (another
 * model's session creation on libuv's pool calling cudaStreamSynchronize(nullptr), a run growing its arena) fails
 * with error 900 "operation not permitted when stream is capturing" — failing that model's load for good — and
 * breaks the capture. Only the engine threads can opt out (cudart.ts `ignoreOtherCaptures`); libuv's pool threads
 * cannot be reached one by one. So the loads that capture (a model with `enable_cuda_graph`, whose graph_spec
 * graphs are captured at load) hold the gate alone, and every other KIND_GPU load and run of the device holds it
 * shared: a capture waits for the loads and runs in flight, and what comes after it waits for the capture.
 *
 * A waiting capture goes before later shared entries (a busy device never starves a load). Shared entries cost no
 * promise when no capture holds or waits (the run path). Threading: main thread (every load and run of every
 * transport starts there), process-wide per device id.
 */
export type GateRelease = () => void;

interface Waiter {
  exclusive: boolean;
  grant: (release: GateRelease) => void;
}

export class DeviceGate {
  #shared = 0;
  #exclusive = false;
  readonly #waiting: Waiter[] = [];
  /** Entries that had to wait (metrics and tests). */
  waits = 0;

  /** A shared entry now, or undefined when a capture holds or waits (then `enter(false)`). */
  tryShared(): GateRelease | undefined {
    if (this.#exclusive || this.#waiting.length > 0) return undefined;
    this.#shared++;
    return this.#releaser(false);
  }

  /** Waits for an entry: `exclusive` alone on the device, else beside other shared ones. */
  enter(exclusive: boolean, signal?: AbortSignal): Promise<GateRelease> {
    if (!exclusive) {
      const now = this.tryShared();
      if (now !== undefined) return Promise.resolve(now);
    } else if (!this.#exclusive && this.#shared === 0 && this.#waiting.length === 0) {
      this.#exclusive = true;
      return Promise.resolve(this.#releaser(true));
    }
    if (signal?.aborted) return Promise.reject(new CancelledError('cancelled while waiting for the GPU'));
    this.waits++;
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        exclusive,
        grant: (release) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(release);
        },
      };
      const onAbort = (): void => {
        const i = this.#waiting.indexOf(waiter);
        if (i < 0) return;
        this.#waiting.splice(i, 1);
        reject(new CancelledError('cancelled while waiting for the GPU'));
        this.#admit();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  #releaser(exclusive: boolean): GateRelease {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (exclusive) this.#exclusive = false;
      else this.#shared--;
      this.#admit();
    };
  }

  /** Grants waiters in order: one exclusive when nothing holds, or the shared ones before the next exclusive. */
  #admit(): void {
    while (this.#waiting.length > 0 && !this.#exclusive) {
      const next = this.#waiting[0];
      if (next.exclusive) {
        if (this.#shared > 0) return;
        this.#waiting.shift();
        this.#exclusive = true;
        next.grant(this.#releaser(true));
        return;
      }
      this.#waiting.shift();
      this.#shared++;
      next.grant(this.#releaser(false));
    }
  }
}

const gates = new Map<number, DeviceGate>();

/** The process's gate of a CUDA device id. */
export function deviceGate(device: number): DeviceGate {
  let g = gates.get(device);
  if (g === undefined) {
    g = new DeviceGate();
    gates.set(device, g);
  }
  return g;
}
