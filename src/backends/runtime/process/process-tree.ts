import { readFileSync, readdirSync, statSync } from 'node:fs';

/**
 * Whether this process or any process below it (engine processes, Python stubs and whatever they started) has a
 * given file open or mapped, read from /proc: the file's identity (device and inode), not its name, so a hard link
 * or a rename of a server segment is still found. What it answers for: the segments the server and its children use
 * for their own tensors, which a client must never be given (regions.ts). The scan is a few hundred small reads,
 * done per registration only, never per request.
 */

export interface FileIdentity {
  readonly dev: bigint;
  readonly ino: bigint;
}

/** More processes than this below the server are not scanned (a fork bomb must not stall registrations). */
const MAX_PROCESSES = 1024;

/** The pids of this process and every descendant, breadth first, from /proc/<pid>/task/<tid>/children. */
export function processTree(root = process.pid): number[] {
  const pids = [root];
  const seen = new Set(pids);
  for (let i = 0; i < pids.length && pids.length < MAX_PROCESSES; i++) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${pids[i]}/task`);
    } catch {
      continue; // gone since it was listed
    }
    for (const t of tasks) {
      let children: string;
      try {
        children = readFileSync(`/proc/${pids[i]}/task/${t}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const c of children.split(' ')) {
        const pid = Number(c);
        if (c !== '' && Number.isSafeInteger(pid) && !seen.has(pid)) {
          seen.add(pid);
          pids.push(pid);
        }
      }
    }
  }
  return pids;
}

/** dev_t split as the kernel prints it in /proc/<pid>/maps ("major:minor", hex): glibc's encoding. */
function devNumbers(dev: bigint): [bigint, bigint] {
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  return [major, minor];
}

function mapsHave(pid: number, target: FileIdentity): boolean {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/maps`, 'utf8');
  } catch {
    return false;
  }
  const [major, minor] = devNumbers(target.dev);
  const ino = target.ino.toString();
  for (const line of text.split('\n')) {
    // start-end perms offset major:minor inode path
    const f = line.split(/\s+/, 6);
    if (f.length < 6 || f[4] !== ino) continue;
    const [ma, mi] = f[3].split(':');
    if (BigInt(`0x${ma}`) === major && BigInt(`0x${mi}`) === minor) return true;
  }
  return false;
}

function fdsHave(pid: number, target: FileIdentity, skip: ReadonlySet<number>): boolean {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  for (const fd of fds) {
    if (skip.has(Number(fd))) continue;
    try {
      const st = statSync(`/proc/${pid}/fd/${fd}`, { bigint: true });
      if (st.ino === target.ino && st.dev === target.dev) return true;
    } catch {
      // closed since it was listed
    }
  }
  return false;
}

/**
 * Whether the file is open or mapped in this process (leaving out the descriptors in `skipOwnFds`: the caller's
 * own, for client regions) or any descendant.
 */
export function usedByProcessTree(target: FileIdentity, skipOwnFds: ReadonlySet<number>): boolean {
  for (const pid of processTree()) {
    const skip = pid === process.pid ? skipOwnFds : new Set<number>();
    if (mapsHave(pid, target) || fdsHave(pid, target, skip)) return true;
  }
  return false;
}
