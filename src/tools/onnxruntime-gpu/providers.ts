import { access, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { UnsupportedError } from '../../core/errors.js';
import { ORT_LIB_DIR_ENV } from '../../backends/onnxruntime/capi/library.js';

/**
 * Where onnxruntime's execution-provider libraries go and which are there. onnxruntime loads a provider library
 * (`libonnxruntime_providers_cuda.so`) from the folder of the `libonnxruntime.so.1` it runs from, after the bridge
 * `libonnxruntime_providers_shared.so`; onnxruntime-node ships only the CPU library, so the GPU ones come from the
 * `onnxruntime-gpu` wheel of the same version and are placed beside it.
 */

/** The provider libraries of an onnxruntime-gpu wheel, by role. */
export const PROVIDER_FILES = {
  shared: 'libonnxruntime_providers_shared.so',
  cuda: 'libonnxruntime_providers_cuda.so',
  tensorrt: 'libonnxruntime_providers_tensorrt.so',
} as const;

export type ProviderRole = keyof typeof PROVIDER_FILES;

/** Defined where the library is loaded (the backend); the set-up installs into the same folder. */
export { ORT_LIB_DIR_ENV };

/** onnxruntime-node as installed: its version (the onnxruntime-gpu version to match) and its native folder. */
export interface OnnxruntimeNode {
  version: string;
  /** The folder holding `libonnxruntime.so.1`. */
  libDir: string;
}

/** Finds the installed onnxruntime-node package through Node's own resolution, as the engine will load it. */
export async function onnxruntimeNode(): Promise<OnnxruntimeNode> {
  const require = createRequire(import.meta.url);
  const pkgPath = require.resolve('onnxruntime-node/package.json');
  const pkg = JSON.parse(await readFile(pkgPath, 'utf8')) as { version?: string };
  if (!pkg.version) throw new UnsupportedError(`${pkgPath} has no version`);
  // onnxruntime-node's layout: bin/napi-v<N>/<platform>/<arch>/; v6 since 1.14.
  return { version: pkg.version, libDir: join(dirname(pkgPath), 'bin', 'napi-v6', process.platform, process.arch) };
}

/** The folder the provider libraries belong in: `--target`, else $NEREID_ORT_LIB_DIR, else onnxruntime-node's. */
export async function providerDir(target?: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return target ?? env[ORT_LIB_DIR_ENV] ?? (await onnxruntimeNode()).libDir;
}

/** Whether a file exists. */
export async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/**
 * The Linux platform tags of a wheel whose libraries this Node process can load (pip's `--platform` values, newest
 * first). onnxruntime-gpu publishes manylinux wheels for x86_64 and aarch64 only.
 */
export function wheelPlatforms(platform = process.platform, arch = process.arch): string[] {
  if (platform !== 'linux') {
    throw new UnsupportedError(
      `GPU set-up is for Linux: onnxruntime-node's CUDA provider comes from onnxruntime-gpu's manylinux wheel (this is ${platform})`,
    );
  }
  const machine = arch === 'x64' ? 'x86_64' : arch === 'arm64' ? 'aarch64' : undefined;
  if (!machine) throw new UnsupportedError(`onnxruntime-gpu has no Linux wheel for ${arch} (x64 and arm64 only)`);
  return ['manylinux_2_28', 'manylinux_2_27', 'manylinux_2_17'].map((m) => `${m}_${machine}`);
}
