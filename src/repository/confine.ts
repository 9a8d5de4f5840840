import { lstat, readdir, realpath } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';
import type { ModelConfig } from '../config/model-config.js';
import { InvalidArgError } from '../core/errors.js';
import type { BackendDescriptor } from '../backends/contract.js';

/**
 * Trust levels: the command line and the on-disk repository belong to the operator; what a load request brings —
 * its `config` override and its `file:` entries — comes from a client. Every path the client's part names must
 * resolve inside the model folder, symlinks included, or the load fails INVALID_ARG before anything is read:
 * - config paths: `label_filename` (model folder), `default_model_filename` and `cc_model_filenames` (each version
 *   folder), warm-up `input_data_file` (`warmup/`), sequence-state `initial_state.data_file` (`initial_state/`),
 *   `model_operations.op_library_filename` (model folder); the TensorRT accelerator's cache, EP-context and
 *   plugin paths (each version folder: where the onnxruntime backend takes them from; refused as code unless the
 *   server allows code in load requests, server/code-trust.ts);
 * - `backend` and `runtime` are library names, never paths;
 * - files sent as `file:` entries: every path the backends say such a file names beside itself (`referencedFiles`:
 *   an ONNX model's external-data `location`s, relative to the model file's folder).
 * A path that exists is resolved with realpath (every symlink on the way) and must land inside the model folder's
 * realpath; a path that does not exist yet is checked through its deepest existing ancestor.
 */

export interface LoadRequestContent {
  /** The model's (checked) name, for messages. */
  model: string;
  /** The model folder the load will read: the repository's, or the override folder written for `file:` entries. */
  dir: string;
  /** The JSON config override, when the request has one. */
  config?: ModelConfig;
  /** `file:` entries, path (without `file:`) → content. */
  files: ReadonlyMap<string, Uint8Array>;
  /** The server's backends: each says which files a model file of its own names (`referencedFiles`). */
  backends: readonly BackendDescriptor[];
}

/** Triton's key phrase, which its clients and tests look for. */
const STAY = 'must stay within model directory';

export async function confineLoadRequest(req: LoadRequestContent): Promise<void> {
  const rootReal = await realpath(req.dir);
  const inside = async (base: string, rel: string, what: string): Promise<string> => {
    await checkInside(req.dir, rootReal, base, rel, `load of '${req.model}': ${what}`);
    return resolve(base, rel);
  };
  if (req.config !== undefined) await confineConfig(req, inside);
  for (const [path, content] of req.files) {
    for (const b of req.backends) {
      let locations: string[] | undefined;
      try {
        locations = b.referencedFiles?.(path, content, req.config);
      } catch (err) {
        throw new InvalidArgError(`load of '${req.model}': 'file:${path}' is ${(err as Error).message}`, {
          cause: err,
        });
      }
      const folder = dirname(join(req.dir, path));
      for (const loc of locations ?? []) await inside(folder, loc, `external data '${loc}' of 'file:${path}'`);
    }
  }
}

type Inside = (base: string, rel: string, what: string) => Promise<string>;

async function confineConfig(req: LoadRequestContent, inside: Inside): Promise<void> {
  const config = req.config as ModelConfig;
  for (const [field, name] of [
    ['backend', config.backend],
    ['runtime', config.runtime],
  ] as const) {
    if (name !== undefined && name !== '' && (/[/\\\0]/.test(name) || name === '.' || name === '..')) {
      throw new InvalidArgError(
        `load of '${req.model}': backend library name '${name}' escapes backend directory (${field} must be a name, not a path)`,
      );
    }
  }
  for (const o of config.output ?? []) {
    if (o.label_filename) await inside(req.dir, o.label_filename, `label_filename '${o.label_filename}'`);
  }
  const modelFiles = [
    ...(config.default_model_filename ? [['default_model_filename', config.default_model_filename]] : []),
    ...Object.entries(config.cc_model_filenames ?? {}).map(([cc, f]) => [`cc_model_filenames['${cc}']`, f]),
  ];
  if (modelFiles.length > 0) {
    // The file is looked up in every version folder; those present now are checked (symlinks included), and a
    // version folder that does not exist yet is checked lexically as '<n>/'.
    const versions = await versionFolders(req.dir);
    for (const [field, file] of modelFiles) {
      for (const v of versions.length > 0 ? versions : ['1']) {
        await inside(join(req.dir, v), file, `${field} '${file}'`);
      }
    }
  }
  for (const [i, w] of asArray(config.model_warmup).entries()) {
    const inputs = (w as { inputs?: Record<string, { input_data_file?: unknown }> }).inputs ?? {};
    for (const [name, input] of Object.entries(inputs)) {
      const file = input?.input_data_file;
      if (typeof file === 'string' && file !== '') {
        await inside(join(req.dir, 'warmup'), file, `model_warmup[${i}] input '${name}' input_data_file '${file}'`);
      }
    }
  }
  for (const s of asArray((config.sequence_batching as { state?: unknown } | undefined)?.state)) {
    for (const init of asArray((s as { initial_state?: unknown }).initial_state)) {
      const file = (init as { data_file?: unknown }).data_file;
      if (typeof file === 'string' && file !== '') {
        await inside(join(req.dir, 'initial_state'), file, `sequence_batching state initial_state data_file '${file}'`);
      }
    }
  }
  for (const lib of config.model_operations?.op_library_filename ?? []) {
    if (lib) await inside(req.dir, lib, `model_operations op_library_filename '${lib}'`);
  }
  await confineAcceleratorPaths(req, config, inside);
}

/** TensorRT accelerator parameters that name paths (`;` lists for the plugin libraries); see provider-paths.ts. */
const TRT_PATHS: Readonly<Record<string, boolean>> = {
  trt_engine_cache_path: false,
  trt_timing_cache_path: false,
  trt_ep_context_file_path: false,
  trt_extra_plugin_lib_paths: true,
};

async function confineAcceleratorPaths(req: LoadRequestContent, config: ModelConfig, inside: Inside): Promise<void> {
  const accelerators = config.optimization?.execution_accelerators?.gpu_execution_accelerator ?? [];
  const versions = await versionFolders(req.dir);
  for (const ea of accelerators) {
    if (ea.name !== 'tensorrt') continue;
    for (const [key, value] of Object.entries(ea.parameters ?? {})) {
      const list = TRT_PATHS[key];
      if (list === undefined) continue;
      for (const path of list ? value.split(';') : [value]) {
        const p = path.trim();
        if (p === '') continue;
        for (const v of versions.length > 0 ? versions : ['1']) {
          await inside(join(req.dir, v), p, `gpu_execution_accelerator 'tensorrt' parameter ${key} '${p}'`);
        }
      }
    }
  }
}

const asArray = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** ONNX files among the `file:` entries: `*.onnx`, or a version's default model file named by the config. */
async function versionFolders(dir: string): Promise<string[]> {
  const entries = await readdir(dir).catch(() => [] as string[]);
  return entries.filter((e) => /^[1-9][0-9]*$/.test(e));
}

const within = (root: string, p: string): boolean => p === root || p.startsWith(root.endsWith(sep) ? root : root + sep);

/**
 * Throws INVALID_ARG unless `rel`, taken from `base`, stays inside the model folder `root`: lexically first (no
 * absolute path, no climbing out with `..`), then through the filesystem (the deepest existing part of the path,
 * realpath'd, inside realpath(root)).
 */
async function checkInside(root: string, rootReal: string, base: string, rel: string, what: string): Promise<void> {
  if (rel.includes('\0')) throw new InvalidArgError(`${what} holds a NUL byte; it ${STAY}`);
  if (isAbsolute(rel)) throw new InvalidArgError(`${what} is an absolute path; it ${STAY}`);
  const target = resolve(base, rel);
  if (!within(resolve(root), target)) throw new InvalidArgError(`${what} leaves the model folder; it ${STAY}`);
  for (let p = target; ; p = dirname(p)) {
    let real: string;
    try {
      real = await realpath(p);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // A symlink whose target does not exist (yet) could be pointed anywhere later: refused like an escaping one.
      if (code === 'ENOENT' && (await lstat(p).catch(() => undefined))?.isSymbolicLink()) {
        throw new InvalidArgError(`${what} is a dangling symbolic link; it ${STAY}`, { cause: err });
      }
      if ((code === 'ENOENT' || code === 'ENOTDIR') && p !== dirname(p) && within(resolve(root), dirname(p))) continue;
      throw new InvalidArgError(`${what} cannot be resolved (${code ?? 'error'}); it ${STAY}`, { cause: err });
    }
    if (!within(rootReal, real)) {
      throw new InvalidArgError(`${what} resolves outside the model folder through a symbolic link; it ${STAY}`);
    }
    return;
  }
}
