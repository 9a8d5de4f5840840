/**
 * The server's most recent log lines, kept for the web console. The logger pushes each JSON line as written
 * (synchronously, main thread); the console reads them back as one JSON array. Lines are kept as the logger's own
 * text, so a push costs no parse and the array is a join.
 */
export class LogRing {
  readonly capacity: number;
  readonly #lines: string[] = [];
  /** Sequence number of the next line pushed; a reader passes the last one it saw to get only newer lines. */
  #next = 0;

  constructor(capacity = 500) {
    if (!Number.isInteger(capacity) || capacity <= 0) throw new RangeError(`capacity must be a positive integer`);
    this.capacity = capacity;
  }

  /** Adds one JSON line (its trailing newline is dropped); the oldest goes once the ring is full. */
  push(line: string): void {
    this.#lines.push(line.endsWith('\n') ? line.slice(0, -1) : line);
    if (this.#lines.length > this.capacity) this.#lines.shift();
    this.#next++;
  }

  /** Lines after sequence number `after` (all kept lines without it), and the sequence to ask from next time. */
  since(after?: number): { next: number; lines: string[] } {
    const first = this.#next - this.#lines.length;
    const from = after === undefined ? 0 : Math.max(0, Math.min(this.#lines.length, after - first));
    return { next: this.#next, lines: this.#lines.slice(from) };
  }

  /** The lines as the console's JSON body: `{"next":N,"lines":[{...},...]}` without re-serializing each record. */
  json(after?: number): string {
    const { next, lines } = this.since(after);
    return `{"next":${next},"lines":[${lines.join(',')}]}`;
  }
}
