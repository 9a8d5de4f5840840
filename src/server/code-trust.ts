import type { BackendDescriptor } from '../backends/contract.js';
import type { ModelConfig } from '../config/model-config.js';
import { InvalidArgError } from '../core/errors.js';

/**
 * Trust: a model repository is the operator's, so the code in it (a model.py, a TorchScript file) runs. A load
 * request is anybody who can reach the repository API, so code it carries is refused unless the operator started
 * the server with `--allow-code-in-load-requests`. "Code" is what a backend would execute: Python sources and
 * bytecode, pickled/TorchScript models, native libraries, packed Python environments, TensorRT plans (a
 * version-compatible plan carries a lean runtime that TensorRT runs as host code, and any plan may need plugin
 * code); any file sent for a backend that executes its model file (its descriptor says so: python, pytorch,
 * tensorrt); config settings that pick an interpreter or load native code (EXECUTION_ENV_PATH, model_operations);
 * and accelerator options that name files (see PATH_OPTIONS).
 */

/** Code files by name; a shared library keeps counting when versioned (`libx.so.1`, `libx.so.1.2.3`). */
const CODE_FILE = /\.(py|pyc|pyo|pyd|pt|pth|pt2|so(\.\d+)*|dylib|dll|tgz|tar\.gz|sh|plan)$/i;

/**
 * Accelerator parameters (onnxruntime's TensorRT and OpenVINO providers) that name a file or folder the engine
 * loads, deserializes or writes: plugin libraries (native code), TensorRT engine, timing and EP-context caches
 * (serialized engines, which may carry plugin code), the INT8 calibration table, OpenVINO's cache folder and its
 * load_config file. In a load request they are refused like code: a load request must not make the server read
 * or write files the operator did not put there. With --allow-code-in-load-requests the TensorRT ones are still
 * confined to the model folder (repository/confine.ts). A config in the model repository (the operator's) may set
 * them.
 */
const PATH_OPTIONS = new Set([
  'trt_engine_cache_path',
  'trt_engine_cache_prefix',
  'trt_timing_cache_path',
  'trt_extra_plugin_lib_paths',
  'trt_ep_context_file_path',
  'int8_calibration_table_name',
  'cache_dir',
  'load_config',
]);

function pathOption(config: ModelConfig): string | undefined {
  const ea = config.optimization?.execution_accelerators;
  for (const [kind, list] of [
    ['gpu_execution_accelerator', ea?.gpu_execution_accelerator],
    ['cpu_execution_accelerator', ea?.cpu_execution_accelerator],
  ] as const) {
    for (const acc of list ?? []) {
      const key = Object.keys(acc.parameters ?? {}).find((k) => PATH_OPTIONS.has(k));
      if (key !== undefined) return `${kind} '${acc.name ?? ''}' parameter ${key}, which names a file`;
    }
  }
  return undefined;
}

/**
 * What in a load request is code, described for the error message; undefined when nothing is. Which backends run
 * their model file is theirs to say (`executesModelFile` in their descriptors).
 */
export function codeInLoadRequest(
  config: ModelConfig | undefined,
  files: ReadonlyMap<string, Uint8Array>,
  backends: readonly BackendDescriptor[],
): string | undefined {
  for (const path of files.keys()) {
    if (CODE_FILE.test(path)) return `file:${path}`;
  }
  if (config === undefined) return undefined;
  const backend = backends.find((b) =>
    config.backend ? b.name === config.backend : b.platforms.includes(config.platform ?? ''),
  );
  const executes = backend?.executesModelFile === true;
  if (executes && files.size > 0) {
    return `file:${[...files.keys()][0]} for the '${config.backend || config.platform}' backend, which executes its model file`;
  }
  if (config.parameters?.EXECUTION_ENV_PATH?.string_value) return 'parameter EXECUTION_ENV_PATH';
  if ((config.model_operations?.op_library_filename?.length ?? 0) > 0) return 'model_operations.op_library_filename';
  return pathOption(config);
}

/** Throws INVALID_ARG when the request carries code and the operator did not allow it. */
export function refuseCodeInLoadRequest(
  name: string,
  config: ModelConfig | undefined,
  files: ReadonlyMap<string, Uint8Array>,
  allowed: boolean,
  backends: readonly BackendDescriptor[],
): void {
  if (allowed) return;
  const what = codeInLoadRequest(config, files, backends);
  if (what === undefined) return;
  throw new InvalidArgError(
    `failed to load '${name}': the load request carries code (${what}); Nereid runs code sent in load requests only when started with --allow-code-in-load-requests (put the model in the model repository instead)`,
  );
}
