/**
 * The layering of docs/architecture.md, enforced: every relative import in src/ (tests excepted) goes from a
 * folder to one at its left in LAYERS, or within a folder. madge (`npm run cycles`) finds cycles; this finds the
 * imports that run the wrong way without closing one, which is how cycles start. Exceptions are listed in ALLOWED
 * with the reason docs/architecture.md gives. Exit 1 with one line per import that breaks the rule.
 *
 *   node --import tsx scripts/check-layers.ts [src]
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';

/** Left to right: a folder imports only folders to its left. Top-level files (serve.ts, index.ts) wire everything. */
export const LAYERS = [
  'core',
  'native',
  'config',
  'backends',
  'scheduler',
  'repository',
  'metrics',
  'server',
  'protocol',
  'console',
  'frontend',
  'tools',
  'cli',
] as const;

/** `client/` ships alone (the package's `./client` export): it imports only core/. */
const CLIENT_MAY_IMPORT = new Set(['client', 'core']);

/** `from -> to` imports the architecture allows against the order, each with its reason. */
export const ALLOWED: Readonly<Record<string, string>> = {
  'cli -> (top)': "the CLI starts the server that src/serve.ts wires (the commands are the package's entry)",
  'tools -> client':
    'nereid tune measures a server as its users do, through the client (which imports only core/, so no cycle)',
};

const IMPORT = /(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g;

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) return tsFiles(p);
    return p.endsWith('.ts') && !p.endsWith('.test.ts') && !p.endsWith('.d.ts') ? [p] : [];
  });
}

/** The layer of a path under `root`: its first folder, or '(top)' for a file directly in it. */
function layerOf(root: string, path: string): string {
  const parts = relative(root, path).split(sep);
  return parts.length > 1 ? parts[0] : '(top)';
}

/** Every import that breaks the layering, as `file: from -> to (specifier)`. */
export function violations(root: string): string[] {
  const out: string[] = [];
  for (const file of tsFiles(root)) {
    const from = layerOf(root, file);
    if (from === '(top)') continue;
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2];
      const target = normalize(join(dirname(file), spec));
      if (relative(root, target).startsWith('..')) continue; // outside src/: package files, not layers
      const to = layerOf(root, target);
      if (to === from || ALLOWED[`${from} -> ${to}`] !== undefined) continue;
      const ok =
        from === 'client'
          ? CLIENT_MAY_IMPORT.has(to)
          : to !== '(top)' &&
            (LAYERS as readonly string[]).includes(from) &&
            (LAYERS as readonly string[]).indexOf(to) >= 0 &&
            (LAYERS as readonly string[]).indexOf(to) < (LAYERS as readonly string[]).indexOf(from);
      if (!ok) out.push(`${relative(process.cwd(), file)}: ${from} -> ${to} ('${spec}')`);
    }
  }
  return out;
}

if (process.argv[1]?.endsWith('check-layers.ts')) {
  const root = process.argv[2] ?? 'src';
  const unknown = readdirSync(root).filter(
    (n) => statSync(join(root, n)).isDirectory() && n !== 'client' && !(LAYERS as readonly string[]).includes(n),
  );
  const bad = violations(root);
  for (const u of unknown) bad.push(`${root}/${u}: a folder with no place in LAYERS (scripts/check-layers.ts)`);
  if (bad.length > 0) {
    process.stderr.write(`imports against the layering (docs/architecture.md):\n${bad.join('\n')}\n`);
    process.exit(1);
  }
  process.stdout.write(`layering holds: ${LAYERS.join(' → ')}; client → core\n`);
}
