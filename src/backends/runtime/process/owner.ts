import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readdirSync, renameSync, statSync, unlinkSync } from 'node:fs';
import { SHM_DIR, lockFile } from './shm.js';

/**
 * Who owns a /dev/shm segment, so that a server started after a crash removes what a killed server left and never
 * what a live one uses.
 *
 * Every segment of this process and its children is named `<base><token>_<serial>_…`, where the token is this
 * process's own (pid and 32 random bits, never reused). Beside them lies `nereid_owner_<token>`, an empty file this
 * process holds an exclusive flock(2) on for its whole life. The kernel drops the lock when the process dies (kill
 * -9 included), so a sweep that can take the lock knows the owner is gone; while the owner lives, it cannot. A pid
 * check alone would not do: two containers sharing /dev/shm (docker --ipc=host) see different pids, and a pid is
 * reused. The lock file is opened close-on-exec (libuv's default), so children never inherit the lock.
 */

/** Name prefix of the owner files. */
export const OWNER_PREFIX = 'nereid_owner_';

/** Segment name prefixes of Nereid's process transports (Python, PyTorch, TensorRT), refused as client keys. */
export const SEGMENT_BASES: ReadonlySet<string> = new Set(['nereid_python_', 'nereid_torch_', 'nereid_trt_']);
const bases = SEGMENT_BASES as Set<string>;

/** A half-made owner file is this old before a sweep may take it for a dead one (it is renamed within µs). */
const PENDING_GRACE_MS = 60_000;

let token: string | undefined;
let serial = 0;

function ownerPath(t: string): string {
  return `${SHM_DIR}/${OWNER_PREFIX}${t}`;
}

/**
 * This process's token, taking the owner lock on first use. The file is locked under a temporary name and renamed:
 * a sweep never sees an owner file nobody holds yet.
 */
function ownerToken(): string {
  if (token !== undefined) return token;
  const t = `${process.pid}x${randomBytes(4).toString('hex')}`;
  const pending = `${ownerPath(t)}.new`;
  const fd = openSync(pending, 'wx', 0o600);
  try {
    if (!lockFile(fd, true)) throw new Error(`cannot lock ${pending}`);
    renameSync(pending, ownerPath(t));
  } catch (e) {
    closeSync(fd);
    unlinkQuietly(pending);
    throw e;
  }
  // Held open for the process's life: the lock is what says this server is alive. A clean exit removes what is left.
  process.once('exit', () => removeToken(t));
  token = t;
  return t;
}

/**
 * A fresh prefix for one child process's segments, `<base><token>_<serial>_`. `base` (a backend's default or the
 * operator's `shm-region-prefix-name`, ending in '_') is remembered as one that clients may not register.
 */
export function segmentPrefix(base: string): string {
  bases.add(base);
  return `${base}${ownerToken()}_${serial++}_`;
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

/** Removes every segment of a token, then its owner file. */
function removeToken(t: string, names?: readonly string[]): void {
  const mark = `${t}_`;
  for (const n of names ?? listShm()) if (n.includes(mark)) unlinkQuietly(`${SHM_DIR}/${n}`);
  unlinkQuietly(ownerPath(t));
}

function listShm(): string[] {
  try {
    return readdirSync(SHM_DIR);
  } catch {
    return [];
  }
}

/** Whether the owner file at `path` is held by a live process (its lock cannot be taken). */
function held(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return false;
  }
  try {
    return !lockFile(fd, false);
  } finally {
    closeSync(fd);
  }
}

/**
 * Removes the segments of Nereid processes that died without cleaning up (owner file no longer locked). Segments
 * of live servers, this one included, stay. Returns the tokens swept, for the log. Cheap: one readdir.
 */
export function sweepStaleSegments(): string[] {
  const names = listShm();
  const swept: string[] = [];
  for (const n of names) {
    if (!n.startsWith(OWNER_PREFIX)) continue;
    const pending = n.endsWith('.new');
    const t = n.slice(OWNER_PREFIX.length, pending ? -'.new'.length : undefined);
    if (t === token || !/^\d+x[0-9a-f]{8}$/.test(t)) continue;
    const path = `${SHM_DIR}/${n}`;
    if (pending) {
      // Created and not yet renamed: only a file long left so (its creator died in between) is removed.
      if (!held(path) && isOlderThan(path, PENDING_GRACE_MS)) unlinkQuietly(path);
      continue;
    }
    if (held(path)) continue;
    removeToken(t, names);
    swept.push(t);
  }
  return swept;
}

function isOlderThan(path: string, ms: number): boolean {
  try {
    return Date.now() - statSync(path).mtimeMs > ms;
  } catch {
    return false;
  }
}
