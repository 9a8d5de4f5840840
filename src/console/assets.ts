import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { packageRoot } from '../config/schema.js';

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

/** One file of the console, read into memory. */
export interface Asset {
  body: Buffer;
  type: string;
}

/** The folder the console's files live in: `console/` at the package root (shipped in the npm package). */
export function assetsDir(): string {
  return join(packageRoot(), 'console');
}

/**
 * Reads the console's files once, at start (a few tens of KiB): a request never touches the file system, and only
 * the names found here can be served — no path from a URL ever reaches `join`. Files of other types are skipped.
 */
export function loadAssets(dir = assetsDir()): ReadonlyMap<string, Asset> {
  const out = new Map<string, Asset>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (type !== undefined) out.set(name, { body: readFileSync(join(dir, name)), type });
  }
  return out;
}
