import { execFile, spawn } from 'node:child_process';
import { STDIO, type CommandIo } from './command-io.js';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { InvalidArgError } from '../core/errors.js';
import { readSetupRecord, tensorrtHome, type SetupRecord } from '../backends/tensorrt/environment.js';
import { ROOT, PYTHON_DIR } from '../backends/runtime/process/python-env.js';

/**
 * `nereid tensorrt setup | check`: a Python that can `import tensorrt` (and `cuda-bindings`) for the TensorRT
 * backend and `nereid convert`, recorded in `$NEREID_TENSORRT_HOME/env.json` (default ~/.cache/nereid/tensorrt).
 *
 * setup: 1. an existing TensorRT in the chosen Python (of the asked version, when one is asked) is used as it is;
 * 2. else NVIDIA's own wheels, `pip install tensorrt-cu13==<version>` (what real users have; they come from
 * pypi.nvidia.com); 3. where that index is unreachable, the fallback: the native libraries from Maven Central's
 * `org.bytedeco:tensorrt:<v>:linux-x86_64-redist` jar (fetched with curl, unpacked into <home>/lib) plus PyPI's
 * `tensorrt-cu13-bindings` wheel installed into <home>/site and a `tensorrt` shim module, with `--jar`/`--wheel`
 * for machines without network. Then the check: `import tensorrt`, its version, the GPUs CUDA sees, and a TensorRT
 * runtime created on GPU 0 (whose failure is TensorRT's own message).
 */

const execFileP = promisify(execFile);

/**
 * TensorRT version -> the Maven Central redistributable carrying its libraries (linux-x86_64) and the PyPI
 * bindings that match it. `cuda`: the CUDA major the libraries link (cudart is linked in), which names the bindings
 * wheel (`tensorrt-cu12-bindings`) and picks the cuda-bindings line. 10.6 is the last of these jars with the
 * all-architecture builder resource (measured on an H200: later jars ship only the PTX one, and their builder
 * fails on sm_90), so it is the fallback's default: the one that can build plans on the GPU.
 */
export const MAVEN_ARTIFACTS: Readonly<Record<string, { maven: string; bindings: string; cuda: 12 | 13 }>> =
  Object.freeze({
    '10.6': { maven: '10.6-1.5.11', bindings: '10.6.0', cuda: 12 },
    '10.15': { maven: '10.15-1.5.13', bindings: '10.15.1.29', cuda: 13 },
    '11.2': { maven: '11.2-1.5.14', bindings: '11.2.1.2', cuda: 13 },
  });
/** NVIDIA's own wheels, where pypi.nvidia.com is reachable. */
export const DEFAULT_VERSION = '11.2.1.2';
/** The fallback's, where it is not: the newest redistributable whose builder works on every architecture. */
export const FALLBACK_VERSION = '10.6.0';

/** What the fallback installs for a TensorRT version: the jar's URL, and the PyPI packages beside it. */
export function fallbackPlan(version: string): { url: string; jar: string; packages: string[] } | undefined {
  const a = MAVEN_ARTIFACTS[version.split('.').slice(0, 2).join('.')];
  if (a === undefined) return undefined;
  const jar = `tensorrt-${a.maven}-linux-x86_64-redist.jar`;
  return {
    url: `https://repo1.maven.org/maven2/org/bytedeco/tensorrt/${a.maven}/${jar}`,
    jar,
    packages: [
      `tensorrt-cu${a.cuda}-bindings==${a.bindings}`,
      a.cuda === 12 ? 'cuda-bindings>=12.6,<13' : 'cuda-bindings>=13,<14',
      'numpy',
    ],
  };
}

/** The SHA-1 Maven Central publishes beside every artifact (`<url>.sha1`) against the file's; a message or undefined. */
export async function sha1Mismatch(file: string, published: string): Promise<string | undefined> {
  const want = published.trim().split(/\s+/)[0]?.toLowerCase() ?? '';
  if (!/^[0-9a-f]{40}$/.test(want)) return `the published checksum '${published.trim().slice(0, 60)}' is not a SHA-1`;
  const hash = createHash('sha1');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  const got = hash.digest('hex');
  return got === want ? undefined : `SHA-1 of ${file} is ${got}, Maven Central publishes ${want}`;
}

export const TENSORRT_HELP = `Usage:
  nereid tensorrt setup [--python PY] [--version V] [--home DIR] [--fallback-only] [--jar FILE] [--wheel FILE]...
      Finds TensorRT in PY (default: the repository .venv, else python3) or installs it: NVIDIA's tensorrt-cu13==V
      wheels, else (NVIDIA's index unreachable) the libraries from Maven Central (checked against its SHA-1) plus
      PyPI's tensorrt-cuNN-bindings; then builds and runs a tiny plan on GPU 0.
      --version V      the TensorRT version your plans were built with (default ${DEFAULT_VERSION}; the fallback's
                       default is ${FALLBACK_VERSION}, the newest redistributable that builds on every GPU architecture)
      --home DIR       where the fallback goes and env.json is written (default $NEREID_TENSORRT_HOME or ~/.cache/nereid/tensorrt)
      --fallback-only  skip NVIDIA's wheels (this machine cannot reach pypi.nvidia.com)
      --jar FILE       a downloaded org.bytedeco tensorrt linux-x86_64-redist jar, or a folder with its libraries (offline)
      --wheel FILE     wheels to install instead of downloading (tensorrt-cuNN-bindings, cuda-bindings; offline)
  nereid tensorrt check [--plan PATH]
      Imports TensorRT with what setup recorded, lists the GPUs, creates a runtime, builds and runs a tiny plan
      (does the builder work on this GPU?); with --plan, deserializes it.

Exit status: 0 ready, 1 something is missing (said what), 2 bad usage.
`;

function parseArgs(
  argv: readonly string[],
  allowed: readonly string[],
  repeat: readonly string[] = [],
): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m || !allowed.includes(m[1]))
      throw new InvalidArgError(`unexpected argument '${argv[i]}' (see nereid tensorrt --help)`);
    if (m[1] === 'fallback-only') {
      out[m[1]] = ['1'];
      continue;
    }
    const value = m[2] ?? argv[++i];
    if (value === undefined || value === '') throw new InvalidArgError(`--${m[1]} needs a value`);
    if (out[m[1]] && !repeat.includes(m[1])) throw new InvalidArgError(`--${m[1]} is given twice`);
    (out[m[1]] ??= []).push(value);
  }
  return out;
}

function defaultPython(): string {
  const venv = join(ROOT, '.venv', 'bin', 'python');
  return existsSync(venv) ? venv : 'python3';
}

function envFor(rec: SetupRecord | undefined): NodeJS.ProcessEnv {
  const env = { ...process.env };
  const pp = [PYTHON_DIR, ...(rec?.python_path ?? []), ...(process.env.PYTHONPATH ? [process.env.PYTHONPATH] : [])];
  env.PYTHONPATH = pp.join(':');
  if (rec?.ld_library_path?.length) {
    env.LD_LIBRARY_PATH = [
      ...rec.ld_library_path,
      ...(process.env.LD_LIBRARY_PATH ? [process.env.LD_LIBRARY_PATH] : []),
    ].join(':');
  }
  return env;
}

/** What the check script prints: one JSON line. */
export interface CheckResult {
  tensorrt?: string;
  flavor?: string;
  import_error?: string;
  cuda_error?: string;
  gpus?: string[];
  runtime_error?: string;
  /** A tiny plan built and run on GPU 0 (full runtimes only): whether this TensorRT can build on this GPU. */
  builder?: { ok: boolean; message: string };
  plan?: { ok: boolean; message: string };
}

export async function checkTensorRT(python: string, rec: SetupRecord | undefined, plan?: string): Promise<CheckResult> {
  const env = envFor(rec);
  try {
    const args = ['-m', 'nereid_python.engines.tensorrt.check', ...(plan ? ['--plan', plan] : [])];
    const { stdout } = await execFileP(python, args, { env, timeout: 300_000, maxBuffer: 16 << 20 });
    return JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as CheckResult;
  } catch (e) {
    return { import_error: `cannot run ${python}: ${(e as Error).message.split('\n')[0]}` };
  }
}

function report(r: CheckResult, io: CommandIo): boolean {
  const gpus = (): void => {
    if (r.gpus) io.out(`GPUs: ${r.gpus.length === 0 ? 'none' : r.gpus.map((g, i) => `${i}: ${g}`).join('; ')}\n`);
    if (r.cuda_error) io.err(`CUDA: ${r.cuda_error}\n`);
  };
  // Without a usable GPU nothing else can work here: say that first, before any advice about installing TensorRT.
  const noGpu = r.cuda_error !== undefined || r.gpus?.length === 0;
  if (noGpu) gpus();
  if (r.tensorrt) io.out(`TensorRT ${r.tensorrt} (${r.flavor} runtime) imports\n`);
  else io.err(`TensorRT does not import: ${r.import_error ?? 'unknown reason'}\n`);
  if (!noGpu) gpus();
  if (r.runtime_error) io.err(`TensorRT runtime: ${r.runtime_error}\n`);
  else if (r.tensorrt && r.gpus?.length) io.out('TensorRT runtime created on GPU 0\n');
  if (r.builder)
    (r.builder.ok ? io.out : io.err)(`builder on GPU 0: ${r.builder.ok ? 'works, ' : ''}${r.builder.message}\n`);
  else if (r.flavor === 'lean') io.out('builder: none (a lean runtime runs version-compatible plans only)\n');
  if (r.plan) (r.plan.ok ? io.out : io.err)(`plan: ${r.plan.message}\n`);
  return (
    r.tensorrt !== undefined &&
    (r.gpus?.length ?? 0) > 0 &&
    r.runtime_error === undefined &&
    r.builder?.ok !== false &&
    r.plan?.ok !== false
  );
}

/**
 * Runs a step, its progress (stdout) shown as it comes. Its stderr is kept, and on failure only its `ERROR:` lines
 * (or its last line) are shown: pip's tracebacks are for pip's developers, not for someone installing TensorRT.
 */
function run(cmd: string, args: string[], io: CommandIo, env?: NodeJS.ProcessEnv): Promise<number> {
  io.err(`$ ${cmd} ${args.join(' ')}\n`);
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'inherit', 'pipe'], env });
    const kept: string[] = [];
    let size = 0;
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      if (size < 1 << 20) kept.push(d);
      size += d.length;
      if (cmd === 'curl') io.err(d); // curl's progress bar is on stderr
    });
    child.on('error', (e) => {
      io.err(`cannot run ${cmd}: ${e.message}\n`);
      resolve(127);
    });
    child.on('close', (code) => {
      if (code !== 0 && cmd !== 'curl') {
        const lines = kept
          .join('')
          .split('\n')
          .map((l) => l.trim())
          .filter((l) => l !== '');
        const errors = lines.filter((l) => l.startsWith('ERROR:') || l.startsWith('error:'));
        for (const l of errors.length > 0 ? errors : lines.slice(-1)) io.err(`  ${l}\n`);
      }
      resolve(code ?? 1);
    });
  });
}

/** Downloads the Maven Central jar to `dest` (through a `.part` file), checked against its published SHA-1. */
async function downloadJar(plan: { url: string }, dest: string, io: CommandIo): Promise<boolean> {
  io.out(`downloading ${plan.url} (about 1.1 GB)\n`);
  const part = `${dest}.part`;
  if ((await run('curl', ['-fL', '--progress-bar', '-o', part, plan.url], io)) !== 0) {
    io.err(`cannot download ${plan.url}\n`);
    return false;
  }
  if ((await run('curl', ['-fsSL', '-o', `${part}.sha1`, `${plan.url}.sha1`], io)) !== 0) {
    io.err(`cannot download ${plan.url}.sha1 to check the download against\n`);
    return false;
  }
  const bad = await sha1Mismatch(part, await readFile(`${part}.sha1`, 'utf8'));
  await rm(`${part}.sha1`, { force: true });
  if (bad !== undefined) {
    await rm(part, { force: true });
    io.err(`the download is damaged: ${bad}; run the setup again\n`);
    return false;
  }
  io.out("checksum matches Maven Central's SHA-1\n");
  await rename(part, dest);
  return true;
}

async function fallback(
  python: string,
  version: string,
  home: string,
  jar: string | undefined,
  wheels: string[],
  io: CommandIo,
): Promise<SetupRecord | undefined> {
  const plan = fallbackPlan(version);
  if (plan === undefined && jar === undefined) {
    io.err(
      `no Maven Central redistributable is known for TensorRT ${version} (known: ${Object.keys(MAVEN_ARTIFACTS).join(', ')}); give --jar\n`,
    );
    return undefined;
  }
  const lib = join(home, 'lib');
  await mkdir(lib, { recursive: true });
  let source = jar;
  if (source === undefined) {
    source = join(home, plan!.jar);
    if (!existsSync(source) && !(await downloadJar(plan!, source, io))) return undefined;
  }
  if (source.endsWith('.jar')) {
    if ((await run('unzip', ['-o', '-j', '-q', source, 'org/bytedeco/tensorrt/linux-x86_64/*', '-d', lib], io)) !== 0) {
      io.err(`cannot unpack ${source}\n`);
      return undefined;
    }
  } else {
    for (const f of await readdir(source)) {
      if (f.includes('.so')) await run('cp', ['-f', join(source, f), lib], io);
    }
  }
  const site = join(home, 'site');
  const pkgs =
    wheels.length > 0 ? wheels : (plan?.packages ?? [`tensorrt-cu13-bindings==${version}`, 'cuda-bindings', 'numpy']);
  const pipArgs = [
    '-m',
    'pip',
    'install',
    '--disable-pip-version-check',
    '--upgrade',
    '--target',
    site,
    ...(wheels.length > 0 ? ['--no-deps'] : []),
    ...pkgs,
  ];
  if ((await run(python, pipArgs, io)) !== 0) {
    io.err(`pip could not install ${pkgs.join(', ')} into ${site}\n`);
    return undefined;
  }
  const shim = join(home, 'shim', 'tensorrt');
  await mkdir(shim, { recursive: true });
  await writeFile(
    join(shim, '__init__.py'),
    '"""Written by nereid tensorrt setup: NVIDIA\'s tensorrt-cuNN-bindings wheels name their module tensorrt_bindings."""\nfrom tensorrt_bindings import *  # noqa: F401,F403\nfrom tensorrt_bindings import __version__  # noqa: F401\n',
  );
  return {
    python,
    ld_library_path: [lib],
    python_path: [join(home, 'shim'), site],
    tensorrt_version: version,
    source: `Maven Central ${plan ? plan.jar : basename(source)} (libraries) + PyPI ${plan?.packages[0] ?? 'bindings'}`,
  };
}

export async function runTensorRTCommand(argv: readonly string[], io: CommandIo = STDIO): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h' || rest.includes('--help')) {
    io.out(TENSORRT_HELP);
    return sub === undefined ? 2 : 0;
  }
  try {
    if (sub === 'check') {
      const a = parseArgs(rest, ['plan', 'python']);
      const rec = readSetupRecord();
      const python = a.python?.[0] ?? rec?.python ?? defaultPython();
      return report(await checkTensorRT(python, rec, a.plan?.[0]), io) ? 0 : 1;
    }
    if (sub !== 'setup') {
      io.err(`nereid tensorrt: unknown sub-command '${sub}' (setup, check)\n`);
      return 2;
    }
    const a = parseArgs(rest, ['python', 'version', 'home', 'fallback-only', 'jar', 'wheel'], ['wheel']);
    const python = a.python?.[0] ?? defaultPython();
    const version = a.version?.[0] ?? DEFAULT_VERSION;
    const home = a.home?.[0] ?? tensorrtHome();
    await mkdir(home, { recursive: true });
    const wanted = (r: CheckResult): boolean =>
      r.tensorrt !== undefined && (a.version === undefined || r.tensorrt.startsWith(version));
    let rec: SetupRecord | undefined = { python, source: 'already installed' };
    let r = await checkTensorRT(python, rec);
    if (wanted(r)) {
      io.out(`found TensorRT ${r.tensorrt} in ${python}\n`);
    } else {
      rec = undefined;
      if (a['fallback-only'] === undefined && a.jar === undefined) {
        io.out(`installing NVIDIA's tensorrt-cu13==${version} into ${python}\n`);
        const code = await run(
          python,
          [
            '-m',
            'pip',
            'install',
            '--disable-pip-version-check',
            `tensorrt-cu13==${version}`,
            'cuda-bindings',
            'numpy',
          ],
          io,
        );
        if (code === 0) {
          rec = { python, tensorrt_version: version, source: `pip tensorrt-cu13==${version}` };
          r = await checkTensorRT(python, rec);
          if (!wanted(r)) rec = undefined;
        } else {
          io.err(
            `NVIDIA's wheels did not install (NVIDIA's index unreachable?); falling back to Maven Central + PyPI\n`,
          );
        }
      }
      if (rec === undefined) {
        // Where the user named no version, the fallback installs the one that builds on every GPU architecture.
        const fbVersion = a.version?.[0] ?? FALLBACK_VERSION;
        if (fbVersion !== version)
          io.out(`the fallback installs TensorRT ${fbVersion} (its builder works on every GPU architecture)\n`);
        rec = await fallback(python, fbVersion, home, a.jar?.[0], a.wheel ?? [], io);
        if (rec === undefined) return 1;
        r = await checkTensorRT(python, rec);
      }
    }
    await writeFile(join(home, 'env.json'), `${JSON.stringify(rec, null, 2)}\n`);
    io.out(`recorded ${join(home, 'env.json')} (${rec.source})\n`);
    const prev = process.env.NEREID_TENSORRT_HOME;
    if (a.home !== undefined && prev !== a.home[0]) {
      io.out(`note: set NEREID_TENSORRT_HOME=${home} for 'nereid serve' and 'nereid convert' to use it\n`);
    }
    return report(r, io) ? 0 : 1;
  } catch (e) {
    io.err(`nereid tensorrt: ${(e as Error).message}\n`);
    return e instanceof InvalidArgError ? 2 : 1;
  }
}
