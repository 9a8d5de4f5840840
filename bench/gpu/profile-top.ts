/**
 * Summarizes V8 CPU profiles (`node --cpu-prof`): per file, the functions with the most self time, as a share of
 * the samples. Device runs print this instead of carrying whole profiles back.
 *
 *   node --import tsx bench/gpu/profile-top.ts DIR [top=30]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

const dir = process.argv[2];
const top = Number(process.argv[3] ?? 30);
if (!dir) throw new Error('usage: profile-top.ts DIR [top]');
for (const f of readdirSync(dir).filter((n) => n.endsWith('.cpuprofile'))) {
  const prof = JSON.parse(readFileSync(join(dir, f), 'utf8')) as { nodes: ProfileNode[]; samples: number[] };
  const byNode = new Map<number, ProfileNode>(prof.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  for (const id of prof.samples) {
    const n = byNode.get(id);
    if (n === undefined) continue;
    const { functionName, url, lineNumber } = n.callFrame;
    const key = `${functionName || '(anonymous)'} ${url.replace(/^.*\/(src|node_modules)\//, '$1/')}:${lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + 1);
  }
  const total = prof.samples.length;
  process.stdout.write(`--- ${f}: ${total} samples\n`);
  for (const [k, v] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    process.stdout.write(`${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}\n`);
  }
}
