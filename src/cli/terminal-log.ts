import { formatRecord, type PrettyStyle } from './pretty-record.js';

/** The part of a stream the terminal writer needs (process.stderr, or a test's collector). */
export interface TextSink {
  write(s: string): unknown;
  /** A terminal: a status line may be drawn and redrawn in place. */
  readonly isTTY?: boolean;
  readonly columns?: number;
}

/**
 * Log lines for people on a terminal: each pino JSON line becomes a formatted line; below them, while long work
 * runs, one status line that is redrawn in place (only on a TTY; elsewhere status is never drawn). Everything runs
 * on the main thread, synchronously with the logger's write, so a log line and the status line never interleave.
 */
export class TerminalLog {
  readonly #out: TextSink;
  readonly style: PrettyStyle;
  #status = '';
  readonly #observers: ((rec: Record<string, unknown>) => void)[] = [];

  constructor(out: TextSink, style: PrettyStyle) {
    this.#out = out;
    this.style = style;
  }

  /** Whether a status line can be drawn (the sink is a terminal). */
  get live(): boolean {
    return this.#out.isTTY === true;
  }

  /** Called with each record before it is printed (the load progress watches them). */
  observe(fn: (rec: Record<string, unknown>) => void): void {
    this.#observers.push(fn);
  }

  /** pino's write: one JSON line. A line that is not JSON is printed as it is. */
  readonly write = (line: string): void => {
    let rec: Record<string, unknown>;
    try {
      rec = JSON.parse(line) as Record<string, unknown>;
    } catch {
      this.print(line.replace(/\n$/, ''));
      return;
    }
    for (const fn of this.#observers) fn(rec);
    this.print(formatRecord(rec, this.style));
  };

  /** Prints text (a line or a block) above the status line. */
  print(text: string): void {
    this.#out.write(`${this.#clear()}${text}\n${this.#draw()}`);
  }

  /** Shows `text` as the status line, or removes it (`''`). Ignored where the sink is not a terminal. */
  status(text: string): void {
    if (!this.live || text === this.#status) return;
    const clear = this.#clear();
    this.#status = text;
    this.#out.write(clear + this.#draw());
  }

  #clear(): string {
    return this.#status === '' ? '' : '\r\x1b[2K';
  }

  #draw(): string {
    if (this.#status === '') return '';
    const width = Math.max(20, (this.#out.columns ?? 80) - 1);
    return this.#status.length > width ? `${this.#status.slice(0, width - 1)}…` : this.#status;
  }
}
