import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ModelVersionPolicy } from '../config/model-config.js';
import { InvalidArgError } from '../core/errors.js';

/** A model folder found in one of the repositories. */
export interface ModelLocation {
  name: string;
  dir: string;
  repository: string;
}

/**
 * Lists model folders across repositories. A name found in two repositories is an error for that name
 * (Triton refuses duplicates unless namespacing is on); it is reported, not thrown, so the rest load.
 */
export async function scanRepositories(
  repositories: readonly string[],
): Promise<{ models: ModelLocation[]; duplicates: Map<string, string[]> }> {
  const seen = new Map<string, ModelLocation>();
  const duplicates = new Map<string, string[]>();
  // A folder given twice (`/models` and `/models/`, or through a symlink) is one repository: read once, so that
  // its models are not "in more than one repository".
  const folders = new Set<string>();
  for (const repo of repositories) {
    const real = await realpath(repo).catch(() => repo);
    if (folders.has(real)) continue;
    folders.add(real);
    let entries;
    try {
      entries = await readdir(repo, { withFileTypes: true });
    } catch (err) {
      throw new InvalidArgError(`failed to read model repository '${repo}': ${(err as Error).message}`, { cause: err });
    }
    for (const e of entries) {
      if (e.name.startsWith('.')) continue;
      const dir = join(repo, e.name);
      if (!e.isDirectory() && !(e.isSymbolicLink() && (await stat(dir)).isDirectory())) continue;
      const prev = seen.get(e.name);
      if (prev) {
        duplicates.set(e.name, [...(duplicates.get(e.name) ?? [prev.repository]), repo]);
        continue;
      }
      seen.set(e.name, { name: e.name, dir, repository: repo });
    }
  }
  for (const name of duplicates.keys()) seen.delete(name);
  return { models: [...seen.values()].sort((a, b) => a.name.localeCompare(b.name)), duplicates };
}

/** Numeric version folders of a model (names that are not digits, or start with '0', are ignored as Triton does). */
export async function listVersions(modelDir: string): Promise<number[]> {
  const entries = await readdir(modelDir, { withFileTypes: true });
  const versions: number[] = [];
  for (const e of entries) {
    if (!/^[1-9][0-9]*$/.test(e.name)) continue;
    if (!e.isDirectory() && !(e.isSymbolicLink() && (await stat(join(modelDir, e.name))).isDirectory())) continue;
    const v = Number(e.name);
    if (Number.isSafeInteger(v)) versions.push(v);
  }
  return versions.sort((a, b) => a - b);
}

/** Applies `version_policy` to the available versions: latest N (default 1), all, or specific. */
export function selectVersions(available: readonly number[], policy: ModelVersionPolicy | undefined): number[] {
  if (policy?.all) return [...available];
  if (policy?.specific) {
    const want = new Set(policy.specific.versions ?? []);
    return available.filter((v) => want.has(v));
  }
  const n = policy?.latest?.num_versions ?? 1;
  return available.slice(Math.max(0, available.length - n));
}

/**
 * Files an engine writes into a version folder while serving, not the operator's: onnxruntime's TensorRT provider
 * caches its engines (`.engine`, `.profile`) and timing cache (`.timing`) there by default. Left out of the
 * fingerprint, or poll mode would reload a model because its first load built an engine.
 */
const ENGINE_CACHE_FILE = /\.(engine|profile|timing)$/;

/**
 * What a model folder holds, as one string: config.pbtxt's bytes and the size and modification time of every
 * file under the numeric version folders (but engine caches). Poll mode reloads a model when this changes.
 */
export async function fingerprint(modelDir: string): Promise<string> {
  const parts: string[] = [];
  try {
    parts.push(`config:${(await readFile(join(modelDir, 'config.pbtxt'))).toString('base64')}`);
  } catch {
    parts.push('config:none');
  }
  const walk = async (dir: string, rel: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(dir, e.name);
      const st = await stat(path).catch(() => undefined);
      if (!st) continue;
      if (st.isDirectory()) await walk(path, `${rel}/${e.name}`);
      else if (!ENGINE_CACHE_FILE.test(e.name)) parts.push(`${rel}/${e.name}:${st.size}:${st.mtimeMs}`);
    }
  };
  try {
    for (const v of await listVersions(modelDir)) await walk(join(modelDir, String(v)), String(v));
  } catch {
    parts.push('unreadable');
  }
  // Label files and other top-level files can change the served model too.
  for (const e of (await readdir(modelDir).catch(() => [] as string[])).sort()) {
    if (e === 'config.pbtxt' || /^[0-9]+$/.test(e)) continue;
    const st = await stat(join(modelDir, e)).catch(() => undefined);
    if (st?.isFile()) parts.push(`${e}:${st.size}:${st.mtimeMs}`);
  }
  return parts.join('\n');
}
