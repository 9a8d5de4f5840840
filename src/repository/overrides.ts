import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve, sep } from 'node:path';
import { InternalError, InvalidArgError } from '../core/errors.js';

/**
 * Model names of load requests are path components: refuse anything that could leave the repository, with Triton's
 * check (ValidateModelName: trimmed, then `..` or any `/`) and words. Nereid also refuses `.` (the repository folder
 * itself), `\\` and NUL (not names any folder of a repository can have); `a..b` is a plain name, as in Triton.
 */
export function checkModelName(raw: string): string {
  const name = raw.trim();
  if (name === '') throw new InvalidArgError('Model name cannot be empty. Please enter a valid name to deploy.');
  if (name === '..' || name === '.' || /[/\\\0]/.test(name)) {
    throw new InvalidArgError(`invalid model name '${raw}', model name must not contain path traversal characters`);
  }
  return name;
}

/** Prefix of this process's folder of override models under the OS temp folder: `nereid-overrides-<pid>-XXXXXX`. */
const ROOT_PREFIX = 'nereid-overrides-';

let root: Promise<string> | undefined;

/**
 * The folder holding every override model this process writes, made on first use. Its name carries the pid, so a
 * later start can tell the folders of dead processes (swept) from those of live ones (left alone: several servers
 * may share one machine and one temp folder).
 */
export function overrideRoot(): Promise<string> {
  root ??= mkdtemp(join(tmpdir(), `${ROOT_PREFIX}${process.pid}-`));
  return root;
}

/** An override model folder: `dir` holds the model (`<root>/<random>/<model>`); `tempDir` is what to remove. */
export interface OverrideDir {
  dir: string;
  tempDir: string;
}

/**
 * Writes a load request's `file:<version>/<path>` overrides into a fresh temporary model folder (Triton's
 * override model directory). Each path is checked before anything is written: relative, no `.`/`..`/empty
 * segments, no backslashes or NULs, each segment at most 255 bytes, no path that is both a file and a folder of
 * another, and the resolved path inside the folder (CVE-2023-31036 was a traversal here). We create every
 * directory ourselves, so no symlink can be in the way. On any failure the folder is removed before the error is
 * thrown, and the error names no server path.
 */
export async function writeOverrideDir(model: string, files: ReadonlyMap<string, Uint8Array>): Promise<OverrideDir> {
  const checked = checkOverridePaths([...files.keys()]);
  let tempDir: string;
  try {
    tempDir = await mkdtemp(join(await overrideRoot(), 'load-'));
  } catch {
    // The root was removed under us (a temp cleaner): make a new one.
    root = undefined;
    tempDir = await mkdtemp(join(await overrideRoot(), 'load-'));
  }
  const dir = join(tempDir, model);
  try {
    await mkdir(dir);
    for (const rel of checked) {
      const target = resolve(dir, rel);
      if (!target.startsWith(dir + sep)) {
        throw new InvalidArgError(`Invalid file parameter 'file:${rel}': must stay within model directory.`);
      }
      await mkdir(resolve(target, '..'), { recursive: true });
      await writeFile(target, files.get(rel) as Uint8Array, { flag: 'wx' });
    }
  } catch (err) {
    await rm(tempDir, { recursive: true, force: true });
    if (err instanceof InvalidArgError) throw err;
    // An fs error's message holds the temp path; the client gets the code only, the log gets the cause.
    const code = (err as NodeJS.ErrnoException).code ?? 'unknown error';
    throw new InternalError(`failed to write the file overrides of '${model}': ${code}`, { cause: err });
  }
  return { dir, tempDir };
}

/** Checks every `file:` path and that no path is a folder of another (`file:1` with `file:1/model.onnx`). */
function checkOverridePaths(paths: readonly string[]): string[] {
  const set = new Set(paths);
  for (const path of paths) {
    checkOverridePath(path);
    const segs = path.split('/');
    for (let i = 1; i < segs.length; i++) {
      const parent = segs.slice(0, i).join('/');
      if (set.has(parent)) {
        throw new InvalidArgError(
          `Invalid file parameter 'file:${parent}': 'file:${path}' needs '${parent}' to be a folder, so it cannot also be a file`,
        );
      }
    }
  }
  return [...set];
}

function checkOverridePath(path: string): void {
  const bad = (why: string): never => {
    throw new InvalidArgError(`Invalid file parameter 'file:${path}': ${why}; it must stay within model directory.`);
  };
  if (path === '' || path.startsWith('/') || /^[A-Za-z]:/.test(path)) bad('the path must be relative');
  if (/[\\\0]/.test(path)) bad('backslashes and NUL are not allowed');
  for (const seg of path.split('/')) {
    if (seg === '' || seg === '.' || seg === '..') bad(`the segment '${seg}' is not allowed`);
    if (Buffer.byteLength(seg) > 255) bad('a path segment is longer than 255 bytes');
  }
}

/** Whether a process with this pid exists (EPERM: it exists but belongs to another user). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the override folders left by Nereid processes that no longer run (killed before they could clean up).
 * Folders of live processes, this one included, are left alone. Returns the names removed, for the log.
 */
export async function sweepStaleOverrideDirs(base = tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  let entries: string[];
  try {
    entries = await readdir(base);
  } catch {
    return removed;
  }
  for (const name of entries) {
    const m = /^nereid-overrides-(\d+)-/.exec(name);
    if (m === null) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || alive(pid)) continue;
    await rm(join(base, name), { recursive: true, force: true }).catch(() => undefined);
    removed.push(name);
  }
  return removed;
}
