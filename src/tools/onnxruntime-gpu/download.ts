import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { UnavailableError } from '../../core/errors.js';

/**
 * Downloads the onnxruntime-gpu wheel with the user's pip (`pip download --no-deps --only-binary=:all:`), the one
 * client that knows the user's index, proxy and certificates settings. The wheel's Python tag does not matter (only
 * its native libraries are used); its platform does, so the platform tags are those of this Node process.
 */

export interface DownloadedWheel {
  path: string;
  /** Removes the download folder. */
  cleanup(): Promise<void>;
}

/** Total bytes of the files under `dir` (pip's partial download lives in its temp folder, then in --dest). */
async function bytesUnder(dir: string): Promise<number> {
  let total = 0;
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    const p = join(dir, e.name);
    if (e.isDirectory()) total += await bytesUnder(p);
    else if (e.isFile())
      total += await stat(p).then(
        (s) => s.size,
        () => 0,
      );
  }
  return total;
}

const MB = 1024 * 1024;

/**
 * Runs pip; its output lines are passed on prefixed with `pip: `, and every `progressMs` the bytes received so
 * far are printed (pip draws no progress bar when its output is not a terminal).
 */
export async function downloadWheel(opts: {
  python: string;
  requirement: string;
  platforms: readonly string[];
  print: (line: string) => void;
  progressMs?: number;
}): Promise<DownloadedWheel> {
  const root = await mkdtemp(join(tmpdir(), 'nereid-gpu-setup-'));
  const dest = join(root, 'wheel');
  const work = join(root, 'tmp');
  const cleanup = (): Promise<void> => rm(root, { recursive: true, force: true });
  const args = [
    '-m',
    'pip',
    'download',
    '--no-deps',
    '--only-binary=:all:',
    '--progress-bar=off',
    '--dest',
    dest,
    ...opts.platforms.flatMap((p) => ['--platform', p]),
    opts.requirement,
  ];
  opts.print(`running: ${opts.python} ${args.join(' ')}`);
  try {
    await runPip(opts, args, work, dest);
    const wheels = (await readdir(dest)).filter((f) => f.endsWith('.whl'));
    if (wheels.length !== 1)
      throw new UnavailableError(`pip reported success but left ${wheels.length} wheels in ${dest}`);
    const path = join(dest, wheels[0]);
    opts.print(`downloaded ${wheels[0]} (${((await stat(path)).size / MB).toFixed(0)} MB)`);
    return { path, cleanup };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

type DownloadOptions = Parameters<typeof downloadWheel>[0];

/** Runs pip with `args`, passing its lines on and printing progress; rejects with the reason pip failed. */
function runPip(opts: DownloadOptions, args: string[], work: string, dest: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const child = spawn(opts.python, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      // pip's working files go to a folder of ours, so the progress below can count them.
      env: { ...process.env, TMPDIR: work, PIP_DISABLE_PIP_VERSION_CHECK: '1', PYTHONUNBUFFERED: '1' },
    });
    const tail: string[] = [];
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        if (line.trim() === '') return;
        tail.push(line);
        if (tail.length > 20) tail.shift();
        opts.print(`pip: ${line}`);
      });
    }
    let last = -1;
    let finished = false;
    const started = Date.now();
    const timer = setInterval(() => {
      // A progress line is best effort: a folder that vanished mid-count just skips one line.
      void Promise.all([bytesUnder(work), bytesUnder(dest)]).then(
        ([a, b]) => {
          const got = Math.max(a, b);
          if (got === last || finished) return;
          last = got;
          const secs = Math.round((Date.now() - started) / 1000);
          opts.print(`downloading: ${(got / MB).toFixed(0)} MB after ${secs} s`);
        },
        () => undefined,
      );
    }, opts.progressMs ?? 5000);
    child.once('error', (err: NodeJS.ErrnoException) => {
      finished = true;
      clearInterval(timer);
      reject(
        err.code === 'ENOENT'
          ? new UnavailableError(`'${opts.python}' was not found: pass --python <python with pip>, or --wheel <path>`)
          : err,
      );
    });
    child.once('close', (code) => {
      finished = true;
      clearInterval(timer);
      if (code === 0) return resolve();
      reject(new UnavailableError(`download failed: ${pipFailure(opts, tail.join('\n'), code)}`));
    });
  });
}

/** Why pip failed, from the tail of its output, and what to do. */
function pipFailure(opts: DownloadOptions, text: string, code: number | null): string {
  return /No module named pip/.test(text)
    ? `pip is not installed for ${opts.python} (python -m ensurepip, or your system's python3-pip)`
    : /No matching distribution|Could not find a version/.test(text)
      ? `pip found no ${opts.requirement} wheel for ${opts.platforms[0]} and this Python; try --python with another Python version, or download the wheel elsewhere and pass --wheel <path>`
      : `pip exited with ${code}`;
}
