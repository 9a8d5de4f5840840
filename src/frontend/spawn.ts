import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { ThreadData } from './thread-data.js';

/**
 * Starts a front-end thread running thread.ts, with this module's extension: the same code runs from src/*.ts under
 * tsx and from dist/*.js after tsc. Under tsx the thread registers tsx's loader itself before importing its entry
 * (backends/runtime/worker/spawn.ts explains why `execArgv` is not enough).
 */
const ext = extname(fileURLToPath(import.meta.url));
const ENTRY_URL = new URL(`./thread${ext}`, import.meta.url);

export function spawnFrontEndThread(data: ThreadData): Worker {
  const options = { workerData: data, transferList: [data.syncPort], name: `nereid-frontend-${data.index}` };
  if (ext !== '.ts') return new Worker(ENTRY_URL, options);
  const api = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(ENTRY_URL.href)}); })`;
  return new Worker(code, { ...options, eval: true });
}
