import { mkdir } from 'node:fs/promises';
import { dirname, isAbsolute, resolve, sep } from 'node:path';
import { InvalidArgError, UnavailableError } from '../../core/errors.js';
import type { SessionPlan } from './options-capi.js';
import type { ProviderPlan } from './provider-options.js';

/**
 * Where the paths of onnxruntime's TensorRT provider options point. onnxruntime takes a relative path from the
 * server's working directory, and with `trt_engine_cache_enable` but no `trt_engine_cache_path` it writes its
 * engines there: neither is a place an operator chooses. Nereid resolves each relative path against the model's
 * version folder (the folder of `model.onnx`) and keeps it inside that folder, and defaults an enabled cache's
 * folder to the version folder. Not the model folder: onnxruntime names a cached engine after the model file's
 * name and its graph's structure, not its weights, so two versions of one architecture sharing a folder would
 * serve each other's engines. An absolute path in the repository's config is the operator's and is kept; a load
 * request's paths are checked through the filesystem as well (repository/confine.ts). Pure but for
 * `createTensorrtFolders`.
 */

/** Options naming a folder onnxruntime writes into (and Nereid creates before the session). */
export const TRT_FOLDER_OPTIONS = ['trt_engine_cache_path', 'trt_timing_cache_path'] as const;
/** Options naming a file (the EP-context model onnxruntime writes) or a `;` list of plugin libraries it loads. */
export const TRT_FILE_OPTIONS = ['trt_ep_context_file_path'] as const;
export const TRT_LIST_OPTIONS = ['trt_extra_plugin_lib_paths'] as const;

/** The TensorRT provider's folders to create before its session: resolved cache folders. */
export interface ResolvedTensorrt {
  readonly providers: readonly ProviderPlan[];
  readonly folders: readonly string[];
}

const within = (root: string, p: string): boolean => p === root || p.startsWith(root.endsWith(sep) ? root : root + sep);

/**
 * `providers` with the TensorRT provider's paths made absolute (see above). `versionDir`: the folder holding the
 * model file, which a relative path may not leave. Throws INVALID_ARG naming the option.
 */
export function resolveTensorrtPaths(providers: readonly ProviderPlan[], versionDir: string): ResolvedTensorrt {
  const folders: string[] = [];
  const out = providers.map((p) => {
    if (p.name !== 'tensorrt') return p;
    const options = new Map(p.options);
    const one = (key: string, value: string): string => {
      if (isAbsolute(value)) return resolve(value);
      const abs = resolve(versionDir, value);
      if (!within(resolve(versionDir), abs)) {
        throw new InvalidArgError(
          `optimization.execution_accelerators.gpu_execution_accelerator 'tensorrt' parameter '${key}': ` +
            `'${value}' leaves the version folder (a relative path is taken from the version folder and must stay ` +
            'within model directory; give an absolute path for a folder elsewhere)',
        );
      }
      return abs;
    };
    const enabled = (key: string): boolean => options.get(key) === '1';
    // A cache that is on gets a folder: the version folder unless the config names one.
    if (
      (enabled('trt_engine_cache_enable') || options.has('trt_int8_calibration_table_name')) &&
      !options.has('trt_engine_cache_path')
    ) {
      options.set('trt_engine_cache_path', '.');
    }
    if (enabled('trt_timing_cache_enable') && !options.has('trt_timing_cache_path')) {
      options.set('trt_timing_cache_path', options.get('trt_engine_cache_path') ?? '.');
    }
    for (const key of [...TRT_FOLDER_OPTIONS, ...TRT_FILE_OPTIONS]) {
      const v = options.get(key);
      if (v === undefined) continue;
      const abs = one(key, v);
      options.set(key, abs);
      if ((TRT_FOLDER_OPTIONS as readonly string[]).includes(key)) folders.push(abs);
    }
    for (const key of TRT_LIST_OPTIONS) {
      const v = options.get(key);
      if (v !== undefined) {
        const entries = v.split(';').filter((e) => e.trim() !== '');
        options.set(key, entries.map((e) => one(key, e.trim())).join(';'));
      }
    }
    return { name: p.name, options: [...options] };
  });
  return { providers: out, folders: [...new Set(folders)] };
}

/**
 * The folder relative paths of the model's TensorRT options are taken from and kept in: the version folder when
 * the model file is inside it (`<model>/<version>/model.onnx`), else the model file's folder.
 */
export function providerPathBase(modelDir: string, version: number, modelPath: string): string {
  const versionDir = resolve(modelDir, String(version));
  const file = resolve(modelPath);
  return within(versionDir, file) && versionDir !== file ? versionDir : dirname(file);
}

/** `plan` with its TensorRT paths resolved for the model at `modelPath` (see resolveTensorrtPaths). */
export function withTensorrtPaths(
  plan: SessionPlan,
  ctx: { modelDir: string; version: number; modelPath: string },
): { plan: SessionPlan; folders: readonly string[] } {
  if (!plan.gpuProviders.some((p) => p.name === 'tensorrt')) return { plan, folders: [] };
  const r = resolveTensorrtPaths(plan.gpuProviders, providerPathBase(ctx.modelDir, ctx.version, ctx.modelPath));
  return { plan: Object.freeze({ ...plan, gpuProviders: r.providers }), folders: r.folders };
}

/**
 * Creates the TensorRT provider's cache folders (onnxruntime writes into them at the first build). A folder that
 * cannot be made (a read-only repository) fails the instance UNAVAILABLE naming it and what to do.
 */
export async function createTensorrtFolders(folders: readonly string[], where: string): Promise<void> {
  for (const f of folders) {
    try {
      await mkdir(f, { recursive: true });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      throw new UnavailableError(
        `${where}: cannot create the TensorRT provider's cache folder (${code}); set trt_engine_cache_path / ` +
          'trt_timing_cache_path to a writable absolute path',
        { cause: err },
      );
    }
  }
}
