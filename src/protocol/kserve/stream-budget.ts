import { InvalidArgError, ResourceExhaustedError } from '../../core/errors.js';

/** `--stream-max-pending-bytes` default: 64 MiB of responses a stream's client has not taken yet. */
export const DEFAULT_STREAM_MAX_PENDING_BYTES = 64 * 1024 * 1024;
/** `--stream-stall-timeout-secs` default: a stream whose client took nothing for this long is ended. */
export const DEFAULT_STREAM_STALL_TIMEOUT_SECS = 30;

/** The stream limits as the protocols take them (resolved once, at start). */
export interface StreamLimits {
  /** Bytes of responses pending (made, not yet taken by the client's transport) above which the stream ends. */
  maxPendingBytes: number;
  /** Responses pending above which the stream ends (the gRPC stream's `--grpc-max-response-pool-size`, twice). */
  maxPendingCount: number;
  /** Milliseconds a stream with responses pending may go without its client taking one. */
  stallTimeoutMs: number;
}

/**
 * What one stream (gRPC ModelStreamInfer, HTTP generate_stream) holds for a client that has not taken it: a
 * response is pending from when it is made until the transport took it (a write that returned true, or the
 * `drain` after one that did not). The model's sender waits long before these limits where its transport can
 * (the process transport's window); these bound what is left: an engine that cannot wait, a front-end thread's
 * copy, a client that stopped reading. Crossing a limit, or no response taken for `stallTimeoutMs` while some are
 * pending, calls `onExhausted` once with a RESOURCE_EXHAUSTED error; the stream then ends and cancels its requests.
 * Owned by the stream's handler, on its thread.
 */
export class StreamBudget {
  readonly #limits: StreamLimits;
  readonly #onExhausted: (err: ResourceExhaustedError) => void;
  #bytes = 0;
  #count = 0;
  #timer: NodeJS.Timeout | undefined;
  #exhausted = false;

  constructor(limits: StreamLimits, onExhausted: (err: ResourceExhaustedError) => void) {
    this.#limits = limits;
    this.#onExhausted = onExhausted;
  }

  get exhausted(): boolean {
    return this.#exhausted;
  }

  /** Bytes made and not yet taken, for tests and logs. */
  get pendingBytes(): number {
    return this.#bytes;
  }

  /** A response of `bytes` was made for the client; false once the stream is over its limits. */
  add(bytes: number): boolean {
    if (this.#exhausted) return false;
    this.#bytes += bytes;
    this.#count++;
    const { maxPendingBytes, maxPendingCount } = this.#limits;
    if (this.#bytes > maxPendingBytes || this.#count > maxPendingCount) {
      this.#exhaust(
        `the stream's client has not taken ${this.#count} responses (${this.#bytes} bytes); the limits are ${maxPendingCount} responses and ${maxPendingBytes} bytes (--stream-max-pending-bytes)`,
      );
      return false;
    }
    if (this.#timer === undefined) this.#arm();
    return true;
  }

  /** The transport took a response of `bytes` (given to `add` before). */
  took(bytes: number): void {
    this.#bytes -= bytes;
    this.#count--;
    if (this.#count > 0) this.#timer?.refresh();
    else this.#disarm();
  }

  dispose(): void {
    this.#disarm();
  }

  #arm(): void {
    const ms = this.#limits.stallTimeoutMs;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#exhaust(
        `the stream's client took no response for ${ms / 1000} s while ${this.#count} (${this.#bytes} bytes) were pending (--stream-stall-timeout-secs)`,
      );
    }, ms);
    this.#timer.unref();
  }

  #disarm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #exhaust(message: string): void {
    if (this.#exhausted) return;
    this.#exhausted = true;
    this.#disarm();
    this.#onExhausted(new ResourceExhaustedError(message));
  }
}

/** Resolves the stream limits from options (validated once, at start). */
export function streamLimits(opts: {
  maxPendingBytes?: number;
  stallTimeoutSecs?: number;
  maxResponsePoolSize: number;
}): StreamLimits {
  const bytes = opts.maxPendingBytes ?? DEFAULT_STREAM_MAX_PENDING_BYTES;
  const secs = opts.stallTimeoutSecs ?? DEFAULT_STREAM_STALL_TIMEOUT_SECS;
  if (!Number.isSafeInteger(bytes) || bytes <= 0) {
    throw new InvalidArgError(`--stream-max-pending-bytes must be a positive integer, got ${bytes}`);
  }
  if (!Number.isFinite(secs) || secs <= 0) {
    throw new InvalidArgError(`--stream-stall-timeout-secs must be a positive number, got ${secs}`);
  }
  return Object.freeze({
    maxPendingBytes: bytes,
    maxPendingCount: 2 * opts.maxResponsePoolSize,
    stallTimeoutMs: secs * 1000,
  });
}
