import type { TerminalLog } from './terminal-log.js';

/** A load shows on the status line only once it has taken this long: most loads finish sooner and stay silent. */
export const PROGRESS_AFTER_MS = 1000;
const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * Model loads that take over a second, on the terminal's status line: `⠹ loading text_encoder 2.4 s, simple 1.1 s`.
 * It follows the loader's `load: begin | ready | failed` records (repository/loader.ts), so any load is shown — at
 * start-up or later through the repository API. The timer runs only while a load is in progress and is unref'd:
 * it never keeps the process alive.
 */
export class LoadProgress {
  readonly #term: TerminalLog;
  readonly #now: () => number;
  readonly #loading = new Map<string, number>();
  /** What a slow load says it is doing (records with `progress`: the TensorRT plan build's steps). */
  readonly #doing = new Map<string, string>();
  #timer: NodeJS.Timeout | undefined;
  #frame = 0;

  constructor(term: TerminalLog, now: () => number = Date.now) {
    this.#term = term;
    this.#now = now;
    term.observe((rec) => this.#onRecord(rec));
  }

  /** Models loading now, with their start times (ms). */
  get loading(): ReadonlyMap<string, number> {
    return this.#loading;
  }

  #onRecord(rec: Record<string, unknown>): void {
    const model = rec.model;
    if (typeof model !== 'string') return;
    if (typeof rec.progress === 'string' && this.#loading.has(model)) this.#doing.set(model, rec.progress);
    if (rec.load === 'begin') {
      this.#loading.set(model, this.#now());
      this.#timer ??= setInterval(() => this.render(), 100).unref();
    } else if (rec.load === 'ready' || rec.load === 'failed') {
      this.#loading.delete(model);
      this.#doing.delete(model);
      if (this.#loading.size === 0) this.stop();
    }
  }

  /** The status text for now ('' when no load has run for a second yet); drawn by the timer. */
  render(): string {
    const now = this.#now();
    const slow = [...this.#loading].filter(([, t]) => now - t >= PROGRESS_AFTER_MS);
    const text =
      slow.length === 0
        ? ''
        : `${FRAMES[this.#frame++ % FRAMES.length]} loading ${slow.map(([m, t]) => `${m} ${((now - t) / 1000).toFixed(1)} s${this.#doing.has(m) ? ` (${this.#doing.get(m)})` : ''}`).join(', ')}`;
    this.#term.status(text);
    return text;
  }

  /** Clears the status line and stops the timer (idempotent). */
  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#term.status('');
  }
}
