import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ResourceExhaustedError } from '../../core/errors.js';
import { StreamBudget, type StreamLimits } from '../kserve/stream-budget.js';

export type Json = string | number | boolean | null | Json[] | { [k: string]: Json };

/**
 * Server-sent events on one response; headers go out with the first event. Each event is pending in the stream's
 * budget until the socket took it (`write` returned true, or `drain`); `send`'s promise settles then, which is what
 * the model's sender waits for (backpressure). Past the budget's limits `onExhausted` cancels the request and the
 * stream ends with the RESOURCE_EXHAUSTED error as its last event.
 */
export class SseWriter {
  started = false;
  /** Set once the stream went past its limits. */
  exhausted: ResourceExhaustedError | undefined;
  readonly #req: IncomingMessage;
  readonly #res: ServerResponse;
  readonly #budget: StreamBudget;
  /** Bytes written and not yet taken by the socket (resolved at the next `drain`). */
  #waiting: { bytes: number; taken: () => void }[] = [];

  constructor(
    req: IncomingMessage,
    res: ServerResponse,
    limits: StreamLimits,
    onExhausted: (err: ResourceExhaustedError) => void,
  ) {
    this.#req = req;
    this.#res = res;
    this.#budget = new StreamBudget(limits, (err) => {
      this.exhausted = err;
      this.#release();
      onExhausted(err);
    });
    const release = (): void => this.#release();
    res.on('drain', release);
    res.once('close', () => {
      res.off('drain', release);
      this.#release();
      this.#budget.dispose();
    });
  }

  /** Writes one event; the promise settles once the socket took it (at once when it did). */
  send(value: Json): Promise<void> | undefined {
    const res = this.#res;
    if (res.destroyed || this.exhausted !== undefined) return undefined;
    this.#start();
    const text = `data: ${JSON.stringify(value)}\n\n`;
    const bytes = Buffer.byteLength(text);
    if (!this.#budget.add(bytes)) return undefined;
    if (res.write(text)) {
      this.#budget.took(bytes);
      return undefined;
    }
    return new Promise((taken) => this.#waiting.push({ bytes, taken }));
  }

  /** The stream's last event (an error), outside the budget: it is written once. */
  last(value: Json): void {
    if (this.#res.destroyed) return;
    this.#start();
    this.#res.write(`data: ${JSON.stringify(value)}\n\n`);
  }

  end(): void {
    if (!this.started) {
      // A decoupled model that answered nothing: an empty stream.
      this.#res.statusCode = 200;
      this.#res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    }
    this.#res.end();
    this.#budget.dispose();
  }

  #start(): void {
    if (this.started) return;
    this.started = true;
    const res = this.#res;
    res.statusCode = 200;
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    if (this.#req.readableEnded === false) res.setHeader('Connection', 'close');
  }

  /** The socket drained (or the stream is over): every event written so far was taken. */
  #release(): void {
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const w of waiting) {
      if (this.exhausted === undefined) this.#budget.took(w.bytes);
      w.taken();
    }
  }
}
