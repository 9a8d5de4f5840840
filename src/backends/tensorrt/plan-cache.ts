import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { link, mkdir, open, readFile, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CancelledError, InvalidArgError } from '../../core/errors.js';

/**
 * The folder of TensorRT plans built from ONNX models (the operator's `plan-cache-directory`), one entry per key:
 * `<dir>/<key>/model.plan` and `<dir>/<key>/entry.json` (what the plan was built from and for, and its sha256).
 * The key is the sha256 of the ONNX bytes (and external data), the GPU model with its compute capability, the
 * TensorRT version and the build options: a plan runs only on the TensorRT and GPU it was built for, so an entry of
 * another one can never be found (and the recorded facts are checked too). An entry is verified against its recorded
 * sha256 before every use: a corrupted one is rebuilt, never loaded. Plans here are never version-compatible.
 *
 * Builders of one key take turns through `<dir>/<key>.lock`, created O_EXCL: one builds, the others wait and then
 * find the entry. The holder touches the lock while it builds; a lock whose holder is gone (same host, dead pid) or
 * untouched for STALE_MS is taken over.
 */

/** Everything a plan depends on; each part changes the key. */
export interface PlanKeyParts {
  onnxSha256: string;
  trtVersion: string;
  /** The GPU's name with its compute capability (`NVIDIA H200 (compute capability 9.0)`). */
  gpu: string;
  /** The builder's options (shapes, precision, workspace, batch), as passed to it. */
  build: Readonly<Record<string, unknown>>;
}

/** What entry.json records. */
export interface PlanEntry {
  key: string;
  plan_sha256: string;
  bytes: number;
  trt_version: string;
  gpu: string;
  onnx_sha256: string;
  build: Record<string, unknown>;
  version_compatible: false;
  built_at: string;
  build_seconds: number;
}

/** Bumped when the layout or the key's recipe changes, so that old entries are never read as new ones. */
const FORMAT = 1;
const HEARTBEAT_MS = 2_000;
export const STALE_MS = 30_000;
const POLL_MS = 200;

/** JSON with sorted keys: the same parts always give the same text. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    const keys = Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

export function planKey(p: PlanKeyParts): string {
  const text = canonical({ format: FORMAT, onnx: p.onnxSha256, trt: p.trtVersion, gpu: p.gpu, build: p.build });
  return createHash('sha256').update(text).digest('hex');
}

export async function sha256File(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** The ONNX model's bytes, then each external-data file (by name, sorted) with its name: a changed weight file changes it. */
export async function hashOnnx(path: string, external: readonly string[]): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  for (const name of [...external].sort()) {
    h.update(`\0external:${name}\0`);
    for await (const chunk of createReadStream(join(dirname(path), name))) h.update(chunk as Buffer);
  }
  return h.digest('hex');
}

export type Lookup = { hit: true; plan: string; entry: PlanEntry } | { hit: false; problem?: string };

export class PlanCache {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  planPath(key: string): string {
    return join(this.dir, key, 'model.plan');
  }

  /** A verified entry, or why there is none usable (`problem`: it exists but must not be used). */
  async lookup(key: string, expect: { trtVersion: string; gpu: string }): Promise<Lookup> {
    const plan = this.planPath(key);
    let text: string;
    try {
      text = await readFile(join(this.dir, key, 'entry.json'), 'utf8');
    } catch {
      const orphan = await stat(plan).then(
        () => true,
        () => false,
      );
      return orphan ? { hit: false, problem: 'its plan has no entry.json (an interrupted build)' } : { hit: false };
    }
    let entry: PlanEntry;
    try {
      entry = JSON.parse(text) as PlanEntry;
    } catch (e) {
      return { hit: false, problem: `its entry.json is not JSON (${(e as Error).message})` };
    }
    if (entry.key !== key) return { hit: false, problem: `its entry.json records key ${String(entry.key)}` };
    if (entry.trt_version !== expect.trtVersion) {
      return { hit: false, problem: `it was built by TensorRT ${entry.trt_version}, this is ${expect.trtVersion}` };
    }
    if (entry.gpu !== expect.gpu)
      return { hit: false, problem: `it was built for ${entry.gpu}, this is ${expect.gpu}` };
    let actual: string;
    try {
      actual = await sha256File(plan);
    } catch (e) {
      return { hit: false, problem: `its plan cannot be read (${(e as Error).message})` };
    }
    if (actual !== entry.plan_sha256) {
      return { hit: false, problem: `its plan's sha256 is ${actual}, entry.json records ${entry.plan_sha256}` };
    }
    return { hit: true, plan, entry };
  }

  /** A fresh file in the entry's folder for the builder to write (renamed into place by `store`). */
  async scratch(key: string): Promise<string> {
    await mkdir(join(this.dir, key), { recursive: true, mode: 0o700 });
    return join(this.dir, key, `model.plan.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
  }

  /** Moves a built plan into place and records it; the record comes last, so a crash leaves no usable half entry. */
  async store(key: string, built: string, entry: Omit<PlanEntry, 'key' | 'plan_sha256' | 'bytes'>): Promise<PlanEntry> {
    const record: PlanEntry = {
      ...entry,
      key,
      plan_sha256: await sha256File(built),
      bytes: (await stat(built)).size,
    };
    const meta = join(this.dir, key, 'entry.json');
    await unlink(meta).catch(() => undefined);
    await rename(built, this.planPath(key));
    const tmp = `${meta}.tmp-${process.pid}`;
    await writeFile(tmp, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
    await rename(tmp, meta);
    return record;
  }

  /**
   * Runs `fn` holding the key's lock; `onWait(holder)` once if another builder holds it first. Throws CANCELLED when
   * `signal` aborts while waiting.
   */
  async withLock<T>(
    key: string,
    fn: () => Promise<T>,
    o: { signal?: AbortSignal; onWait?: (holder: string) => void },
  ): Promise<T> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const path = join(this.dir, `${key}.lock`);
    const mine = JSON.stringify({ pid: process.pid, host: hostname(), nonce: randomBytes(8).toString('hex') });
    let waited = false;
    for (;;) {
      if (await tryCreate(path, mine)) break;
      const holder = await readFile(path, 'utf8').catch(() => undefined);
      if (holder !== undefined && (await isStale(path, holder))) {
        await takeOver(path, holder);
        continue;
      }
      if (!waited) {
        waited = true;
        o.onWait?.(holder ?? 'unknown');
      }
      try {
        await sleep(POLL_MS, undefined, { signal: o.signal });
      } catch {
        throw new CancelledError('the load was cancelled while it waited for another build of the same plan');
      }
    }
    const beat = setInterval(() => {
      const now = new Date();
      utimes(path, now, now).catch(() => undefined);
    }, HEARTBEAT_MS);
    beat.unref();
    try {
      return await fn();
    } finally {
      clearInterval(beat);
      const still = await readFile(path, 'utf8').catch(() => undefined);
      if (still === mine) await unlink(path).catch(() => undefined);
    }
  }
}

async function tryCreate(path: string, content: string): Promise<boolean> {
  let fh;
  try {
    fh = await open(path, 'wx', 0o600);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw new InvalidArgError(`cannot create the plan cache's lock ${path}: ${(e as Error).message}`, { cause: e });
  }
  try {
    await fh.writeFile(content);
  } finally {
    await fh.close();
  }
  return true;
}

/** A lock whose holder died (same host, its pid gone) or stopped touching it. */
async function isStale(path: string, holder: string): Promise<boolean> {
  let h: { pid?: number; host?: string } = {};
  try {
    h = JSON.parse(holder) as typeof h;
  } catch {
    // Being written right now, or garbage: only its age tells.
  }
  if (h.host === hostname() && typeof h.pid === 'number' && !alive(h.pid)) return true;
  const st = await stat(path).catch(() => undefined);
  return st !== undefined && Date.now() - st.mtimeMs > STALE_MS;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes a stale lock, unless another waiter replaced it meanwhile (its content is no longer the stale one). */
async function takeOver(path: string, stale: string): Promise<void> {
  const now = await readFile(path, 'utf8').catch(() => undefined);
  if (now !== stale) return;
  const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    await rename(path, aside);
  } catch {
    return;
  }
  const moved = await readFile(aside, 'utf8').catch(() => undefined);
  if (moved !== stale && moved !== undefined) {
    // A fresh lock slipped in between the read and the rename: put it back, unless yet another one took its place.
    await link(aside, path).catch(() => undefined);
  }
  await unlink(aside).catch(() => undefined);
}
