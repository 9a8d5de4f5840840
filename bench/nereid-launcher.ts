/**
 * Child process that runs the real `nereid serve` (dist/cli/main.js, the argv after it) with the event-loop
 * delay reporter of lag.ts in the same process, so the benchmark sees the server's own event-loop lag.
 *
 *   fork('bench/nereid-launcher.ts', ['dist/cli/main.js', 'serve', ...flags], { execArgv: ['--import', 'tsx'] })
 */
import { pathToFileURL } from 'node:url';
import { reportEventLoopDelay } from './lag.js';

const [mainJs, ...args] = process.argv.slice(2);
reportEventLoopDelay();
// main.js reads its command from process.argv.slice(2).
process.argv = [process.argv[0], mainJs, ...args];
await import(pathToFileURL(mainJs).href);
