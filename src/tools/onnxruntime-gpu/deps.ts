import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/**
 * Whether a shared library's dependencies resolve, and which do not. `ldd` lists every unresolved soname at once
 * (the loader in trace mode; the library's code does not run) and honours an LD_LIBRARY_PATH we pass, so a fix can
 * be checked before the user applies it. Where ldd is missing, a real dlopen (koffi) names the first one only.
 */

const run = promisify(execFile);

/** The result for one library file. */
export interface DependencyReport {
  /** Sonames the loader cannot find, in ldd's order. */
  missing: string[];
  /** Why the library cannot be loaded at all, when that is not a missing soname (wrong machine, not ELF). */
  error?: string;
}

/** Parses `ldd` output: the `name => not found` lines. */
export function parseLdd(text: string): string[] {
  const missing: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*(\S+)\s+=>\s+not found\s*$/.exec(line);
    if (m && !missing.includes(m[1])) missing.push(m[1]);
  }
  return missing;
}

/** Parses a dlopen error (`libcudnn.so.9: cannot open shared object file: …`) into the soname it could not find. */
export function missingFromDlerror(message: string): string | undefined {
  return /([^\s:/]+\.so[.\d]*): cannot open shared object file/.exec(message)?.[1];
}

/** Checks `file`'s dependencies under `env` (its LD_LIBRARY_PATH). */
export async function checkDependencies(file: string, env: NodeJS.ProcessEnv = process.env): Promise<DependencyReport> {
  try {
    const { stdout } = await run('ldd', [file], { env, maxBuffer: 1 << 20 });
    return { missing: parseLdd(stdout) };
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    if (e.code === 'ENOENT') return dlopenCheck(file);
    // ldd exits non-zero for a file the loader cannot use at all ("not a dynamic executable", wrong ELF class).
    const text = `${e.stdout ?? ''}${e.stderr ?? ''}`.trim();
    return { missing: parseLdd(text), error: text || e.message };
  }
}

/** The fallback without ldd: a real dlopen in this process (only this process's LD_LIBRARY_PATH applies). */
async function dlopenCheck(file: string): Promise<DependencyReport> {
  const { default: koffi } = await import('koffi');
  const { configureKoffi } = await import('../../native/koffi.js');
  try {
    configureKoffi();
    koffi.load(file, { lazy: true }).unload();
    return { missing: [] };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const soname = missingFromDlerror(message);
    return soname ? { missing: [soname] } : { missing: [], error: message };
  }
}

/**
 * Loads a provider as it is loaded in a server: `before` (onnxruntime's core library where present, then the shared
 * bridge) global, as onnxruntime has them, then the provider binding every symbol now, as onnxruntime does. In this
 * process; returns the loader's message when that fails. Run only by the CLI: it maps the CUDA libraries into the
 * process and leaves them there.
 */
export async function tryLoad(before: readonly string[], providerFile: string): Promise<string | undefined> {
  const { default: koffi } = await import('koffi');
  const { configureKoffi } = await import('../../native/koffi.js');
  try {
    configureKoffi();
    for (const file of before) koffi.load(file, { global: true });
    koffi.load(providerFile);
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** How to get a missing library: the pip packages that ship it (CUDA 13 / cuDNN 9 builds) or what else provides it. */
export interface Remedy {
  /** pip requirement, e.g. `nvidia-cublas==13.*`; undefined where pip cannot provide it. */
  pip?: string;
  /** What it is, for the user. */
  what: string;
}

const REMEDIES: [RegExp, Remedy][] = [
  [/^libcuda\.so/, { what: 'the NVIDIA driver (580 or newer for CUDA 13)' }],
  [/^libcudart\.so\.13/, { pip: 'nvidia-cuda-runtime==13.*', what: 'CUDA 13 runtime' }],
  [/^libcublas(Lt)?\.so\.13/, { pip: 'nvidia-cublas==13.*', what: 'cuBLAS for CUDA 13' }],
  [/^libcurand\.so\.10/, { pip: 'nvidia-curand==10.*', what: 'cuRAND for CUDA 13' }],
  [/^libcufft\.so\.12/, { pip: 'nvidia-cufft==12.*', what: 'cuFFT for CUDA 13' }],
  [/^libnvJitLink\.so\.13/, { pip: 'nvidia-nvjitlink==13.*', what: 'nvJitLink for CUDA 13' }],
  [/^libnvrtc(-builtins)?\.so\.13/, { pip: 'nvidia-cuda-nvrtc==13.*', what: 'NVRTC for CUDA 13' }],
  [/^libcudnn.*\.so\.9/, { pip: 'nvidia-cudnn-cu13==9.*', what: 'cuDNN 9 for CUDA 13' }],
  [/^lib(nvinfer|nvinfer_plugin|nvonnxparser)\.so\.10/, { pip: 'tensorrt-cu13-libs==10.*', what: 'TensorRT 10' }],
];

/** The remedy for a missing soname; unknown ones say so rather than guess. */
export function remedyFor(soname: string): Remedy {
  return REMEDIES.find(([re]) => re.test(soname))?.[1] ?? { what: 'a library Nereid has no advice for' };
}
