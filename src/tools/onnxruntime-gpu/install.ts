import { chmod, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidArgError, UnavailableError } from '../../core/errors.js';
import { PROVIDER_FILES, type ProviderRole } from './providers.js';
import { extractZipEntry, listZip, type ZipEntry } from './zip.js';

/** Where the provider libraries sit inside an onnxruntime-gpu wheel. */
export const WHEEL_LIBRARY_DIR = 'onnxruntime/capi/';

/** What a wheel holds for us. */
export interface WheelContents {
  /** From the `onnxruntime_gpu-<version>.dist-info/` folder. */
  version: string;
  /** The provider libraries present, by role. */
  libraries: Partial<Record<ProviderRole, ZipEntry>>;
}

/**
 * Reads an onnxruntime-gpu wheel's version and provider libraries. Throws UnavailableError naming what is wrong:
 * not a zip, not onnxruntime-gpu, or without the libraries the CUDA provider needs (shared bridge and CUDA).
 */
export async function readWheel(path: string): Promise<WheelContents> {
  const entries = await listZip(path);
  const meta = entries.map((e) => /^onnxruntime_gpu-([^/]+)\.dist-info\/METADATA$/.exec(e.name)).find((m) => m);
  if (!meta) {
    const other = entries.map((e) => /^([^/]+)-([^/-]+)\.dist-info\/METADATA$/.exec(e.name)).find((m) => m);
    throw new UnavailableError(
      `'${path}' is not an onnxruntime-gpu wheel (${other ? `it is ${other[1]} ${other[2]}` : 'no onnxruntime_gpu-*.dist-info/METADATA'})`,
    );
  }
  const libraries: WheelContents['libraries'] = {};
  for (const [role, file] of Object.entries(PROVIDER_FILES) as [ProviderRole, string][]) {
    const e = entries.find((x) => x.name === WHEEL_LIBRARY_DIR + file);
    if (e) libraries[role] = e;
  }
  const needed = (['shared', 'cuda'] as const).filter((r) => !libraries[r]);
  if (needed.length > 0) {
    throw new UnavailableError(
      `'${path}' (onnxruntime-gpu ${meta[1]}) lacks ${needed.map((r) => WHEEL_LIBRARY_DIR + PROVIDER_FILES[r]).join(' and ')}: not a CUDA build of onnxruntime-gpu for Linux`,
    );
  }
  return { version: meta[1], libraries };
}

/**
 * Extracts each library into `target`. A library is written to a temporary name in the same folder and renamed
 * over the old one: a running server that has the old file mapped keeps its copy (rename gives a new inode), where
 * writing into the old file in place would corrupt the code under it; and a failed extraction leaves no half file.
 */
export async function installLibraries(
  wheel: string,
  contents: WheelContents,
  target: string,
  print: (line: string) => void,
): Promise<string[]> {
  const dirStat = await stat(target).catch(() => undefined);
  if (!dirStat?.isDirectory()) throw new InvalidArgError(`target folder '${target}' does not exist`);
  const installed: string[] = [];
  for (const [role, entry] of Object.entries(contents.libraries) as [ProviderRole, ZipEntry][]) {
    const file = PROVIDER_FILES[role];
    const final = join(target, file);
    const partial = join(target, `.${file}.${process.pid}.partial`);
    try {
      await extractZipEntry(wheel, entry, partial);
      await chmod(partial, 0o755);
      await rename(partial, final);
    } catch (err) {
      await rm(partial, { force: true });
      const e = err as NodeJS.ErrnoException;
      if (e.code === 'EACCES' || e.code === 'EPERM' || e.code === 'EROFS') {
        throw new UnavailableError(
          `cannot write ${file} into ${target} (${e.code}): run as the owner of that folder, or pass --target <dir>`,
        );
      }
      throw err;
    }
    installed.push(final);
    print(`installed ${file} (${(entry.size / (1024 * 1024)).toFixed(1)} MB) into ${target}`);
  }
  return installed;
}
