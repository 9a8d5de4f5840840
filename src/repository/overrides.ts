import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve, sep } from 'node:path';
import { InvalidArgError } from '../core/errors.js';

/**
 * Model names from the network are path components: refuse anything that could leave the repository
 * (Triton: `invalid model name '..', model name must not contain path traversal characters`).
 */
export function checkModelName(raw: string): string {
  const name = raw.trim();
  if (name === '') throw new InvalidArgError('Model name cannot be empty. Please enter a valid name to deploy.');
  if (name === '.' || name.includes('..') || /[/\\\0]/.test(name)) {
    throw new InvalidArgError(`invalid model name '${raw}', model name must not contain path traversal characters`);
  }
  return name;
}

/**
 * Writes a load request's `file:<version>/<path>` overrides into a fresh temporary model folder (Triton's
 * override model directory). Each path is checked before anything is written: relative, no `.`/`..`/empty
 * segments, no backslashes or NULs, each segment at most 255 bytes, and the resolved path inside the folder
 * (CVE-2023-31036 was a traversal here). We create every directory ourselves, so no symlink can be in the way.
 */
export async function writeOverrideDir(model: string, files: ReadonlyMap<string, Uint8Array>): Promise<string> {
  const checked = [...files].map(([path, content]) => [checkOverridePath(path), content] as const);
  const dir = await mkdtemp(join(tmpdir(), `nereid-${model}-`));
  try {
    for (const [rel, content] of checked) {
      const target = resolve(dir, rel);
      if (!target.startsWith(dir + sep))
        throw new InvalidArgError(`Invalid file parameter 'file:${rel}': must stay within model directory.`);
      await mkdir(resolve(target, '..'), { recursive: true });
      await writeFile(target, content, { flag: 'wx' });
    }
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return dir;
}

function checkOverridePath(path: string): string {
  const bad = (why: string): never => {
    throw new InvalidArgError(`Invalid file parameter 'file:${path}': ${why}; it must stay within model directory.`);
  };
  if (path === '' || path.startsWith('/') || /^[A-Za-z]:/.test(path)) bad('the path must be relative');
  if (/[\\\0]/.test(path)) bad('backslashes and NUL are not allowed');
  for (const seg of path.split('/')) {
    if (seg === '' || seg === '.' || seg === '..') bad(`the segment '${seg}' is not allowed`);
    if (Buffer.byteLength(seg) > 255) bad('a path segment is longer than 255 bytes');
  }
  return path;
}
