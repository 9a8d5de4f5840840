import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { WorkerData } from './protocol.js';

/**
 * Starts an engine thread running harness.ts. The harness (and the adapter modules it imports) have this
 * module's extension, so the same code runs from src/*.ts under tsx and from dist/*.js after tsc.
 */
const ext = extname(fileURLToPath(import.meta.url));
const HARNESS_URL = new URL(`./harness${ext}`, import.meta.url);

/**
 * Under tsx (source .ts) the thread needs tsx's loader. `execArgv: ['--import', 'tsx']` is not enough on
 * Node 20 (the entry is resolved before the --import hooks apply: ERR_UNKNOWN_FILE_EXTENSION), so a tiny
 * eval'd bootstrap registers tsx in the thread and then imports the harness.
 */
export function spawnEngineThread(data: WorkerData): Worker {
  if (ext !== '.ts') return new Worker(HARNESS_URL, { workerData: data });
  const api = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(HARNESS_URL.href)}); })`;
  return new Worker(code, { eval: true, workerData: data });
}

/** An adapter module's URL with the running code's extension (`adapterUrl(import.meta.url, './adapter')`). */
export function adapterUrl(base: string, relative: string): string {
  return new URL(`${relative}${extname(fileURLToPath(base))}`, base).href;
}
