import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Logger } from '../../../core/logger.js';

/** The child's stdout and stderr become log lines (a model's prints); the last stderr lines explain early exits. */
export function forwardLines(child: ChildProcess, logger: Logger, stderrTail: string[]): void {
  const pid = child.pid;
  const each = (stream: NodeJS.ReadableStream | null, name: 'stdout' | 'stderr'): void => {
    if (stream === null) return;
    const rl = createInterface({ input: stream, crlfDelay: Infinity });
    rl.on('line', (raw: string) => {
      const line = raw.length > 4096 ? `${raw.slice(0, 4096)}…` : raw;
      if (name === 'stderr') {
        stderrTail.push(line);
        if (stderrTail.length > 20) stderrTail.shift();
        logger.warn({ childPid: pid, stream: name }, line);
      } else {
        logger.info({ childPid: pid, stream: name }, line);
      }
    });
  };
  each(child.stdout, 'stdout');
  each(child.stderr, 'stderr');
}
