import { join } from 'node:path';
import { checkDependencies, remedyFor, tryLoad } from './deps.js';
import { PROVIDER_FILES, exists, type ProviderRole } from './providers.js';
import { findInSitePackages } from './python.js';

/**
 * The state of onnxruntime's GPU provider libraries in one folder, and what to do about what is missing. Shared by
 * `nereid gpu setup` (after installing) and `nereid gpu check`; an engine can call `providerStatus` to say why a
 * provider cannot load.
 */

/** One provider library. */
export interface ProviderStatus {
  role: ProviderRole;
  path: string;
  present: boolean;
  /** Sonames the loader cannot find. */
  missing: string[];
  /** Why the file cannot be loaded at all (not ELF, wrong machine), or the loader's message on a real load. */
  error?: string;
  /** Present, every dependency found, and (when asked) a real load succeeded. */
  usable: boolean;
}

/**
 * Checks the shared bridge, the CUDA provider and the TensorRT provider in `dir` under `env`. With `load`, a
 * provider whose dependencies all resolve is also loaded for real in this process (see deps.ts tryLoad).
 */
export async function providerStatus(
  dir: string,
  opts: { env?: NodeJS.ProcessEnv; load?: boolean } = {},
): Promise<ProviderStatus[]> {
  const env = opts.env ?? process.env;
  const sharedPath = join(dir, PROVIDER_FILES.shared);
  const sharedPresent = await exists(sharedPath);
  const out: ProviderStatus[] = [
    { role: 'shared', path: sharedPath, present: sharedPresent, missing: [], usable: sharedPresent },
  ];
  for (const role of ['cuda', 'tensorrt'] as const) {
    const path = join(dir, PROVIDER_FILES[role]);
    if (!(await exists(path))) {
      out.push({ role, path, present: false, missing: [], usable: false });
      continue;
    }
    const deps = await checkDependencies(path, env);
    // onnxruntime loads the bridge itself (global) before a provider, so the bridge is found even without a RUNPATH.
    const missing = deps.missing.filter((s) => !(sharedPresent && s === PROVIDER_FILES.shared));
    if (!sharedPresent) missing.push(PROVIDER_FILES.shared);
    let error = deps.error;
    if (missing.length === 0 && !error && opts.load) {
      const core = join(dir, 'libonnxruntime.so.1');
      error = await tryLoad((await exists(core)) ? [core, sharedPath] : [sharedPath], path);
    }
    out.push({ role, path, present: true, missing, error, usable: missing.length === 0 && !error });
  }
  return out;
}

/** What to tell the user about the missing libraries of one provider. */
export interface Advice {
  /** One line per missing soname: the soname, what it is, the pip requirement. */
  lines: string[];
  /** `python -m pip install …` for the pip-installable ones, if any. */
  pipCommand?: string;
  /** Folders of a Python's site-packages that hold every missing soname, where a check with them resolved. */
  libraryPath?: string[];
}

/**
 * Advice for `status`'s missing sonames. With `python`, its site-packages are searched for them; when all are
 * there, the provider is checked again with those folders on LD_LIBRARY_PATH, and the folders are returned only if
 * that check resolves every dependency (advice that has been tried, not guessed).
 */
export async function adviseMissing(
  status: ProviderStatus,
  python: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Advice> {
  const lines: string[] = [];
  const pip = new Set<string>();
  for (const soname of status.missing) {
    const r = remedyFor(soname);
    if (r.pip) pip.add(r.pip);
    lines.push(`${soname.padEnd(36)} ${r.what}${r.pip ? ` (pip: ${r.pip})` : ''}`);
  }
  const advice: Advice = {
    lines,
    pipCommand:
      pip.size > 0 ? `${python ?? 'python3'} -m pip install ${[...pip].map((p) => `'${p}'`).join(' ')}` : undefined,
  };
  if (!python || status.missing.length === 0) return advice;
  const found = await findInSitePackages(python, status.missing);
  if (found.size < status.missing.length) return advice;
  const dirs = [...new Set(found.values())];
  const current = env.LD_LIBRARY_PATH ? env.LD_LIBRARY_PATH.split(':') : [];
  const recheck = await checkDependencies(status.path, { ...env, LD_LIBRARY_PATH: [...dirs, ...current].join(':') });
  const still = recheck.missing.filter((s) => s !== PROVIDER_FILES.shared);
  if (still.length === 0 && !recheck.error) advice.libraryPath = dirs;
  return advice;
}
