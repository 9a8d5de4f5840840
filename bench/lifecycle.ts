/**
 * Model lifecycle timings for the example repository: explicit load and unload over HTTP, and a poll-mode reload
 * after a config change (from the change to the new config being served).
 *
 *   npm run build && node --import tsx bench/lifecycle.ts
 */
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// The build, as users run it (tsx-loaded sources start worker threads more slowly). A computed specifier keeps the
// type check independent of whether dist/ exists yet.
const dist = new URL('../dist/serve.js', import.meta.url).href;
const { serve } = (await import(dist)) as typeof import('../src/serve.js');

const EXAMPLES = fileURLToPath(new URL('../examples/model_repository', import.meta.url));
const MODELS = ['simple', 'classifier', 'text_encoder'];

async function timed(f: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await f();
  return performance.now() - t;
}

async function post(url: string): Promise<void> {
  const res = await fetch(url, { method: 'POST' });
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${await res.text()}`);
}

const rows: string[] = [];
const explicit = await serve({
  repositories: [EXAMPLES],
  httpPort: 0,
  httpAddress: '127.0.0.1',
  metricsPort: 0,
  allowGrpc: false,
  modelControlMode: 'explicit',
});
for (const m of MODELS) {
  const load = await timed(() => post(`${explicit.httpUrl}/v2/repository/models/${m}/load`));
  const unload = await timed(() => post(`${explicit.httpUrl}/v2/repository/models/${m}/unload`));
  rows.push(`| ${m} | ${load.toFixed(0)} | ${unload.toFixed(0)} |`);
}
await explicit.close();

const root = await mkdtemp(join(tmpdir(), 'nereid-bench-poll-'));
await cp(EXAMPLES, root, { recursive: true });
const poll = await serve({
  repositories: [root],
  httpPort: 0,
  httpAddress: '127.0.0.1',
  metricsPort: 0,
  allowGrpc: false,
  modelControlMode: 'poll',
  repositoryPollSecs: 3600,
});
const reloads: string[] = [];
for (const m of MODELS) {
  const file = join(root, m, 'config.pbtxt');
  await writeFile(file, (await readFile(file, 'utf8')).replace(/max_batch_size: \d+/, 'max_batch_size: 4'));
  const ms = await timed(() => poll.server.pollRepository());
  const cfg = (await (await fetch(`${poll.httpUrl}/v2/models/${m}/config`)).json()) as { max_batch_size: number };
  if (cfg.max_batch_size !== 4) throw new Error(`${m} was not reloaded`);
  reloads.push(`${m} ${ms.toFixed(0)} ms`);
}
await poll.close();
await rm(root, { recursive: true, force: true });

console.log('| model | explicit load ms | unload ms |\n|---|---|---|');
console.log(rows.join('\n'));
console.log(`poll reload after a config change (rescan + atomic swap): ${reloads.join(', ')}`);
