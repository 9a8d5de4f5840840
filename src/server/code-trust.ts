import type { BackendDescriptor } from '../backends/contract.js';
import type { ModelConfig } from '../config/model-config.js';
import { InvalidArgError } from '../core/errors.js';

/**
 * Trust: a model repository is the operator's, so the code in it (a model.py, a TorchScript file) runs. A load
 * request is anybody who can reach the repository API, so code it carries is refused unless the operator started
 * the server with `--allow-code-in-load-requests`. "Code" is what a backend would execute: Python sources and
 * bytecode, pickled/TorchScript models, native libraries, packed Python environments, TensorRT plans (a
 * version-compatible plan carries a lean runtime that TensorRT runs as host code, and any plan may need plugin
 * code); any file sent for a backend that executes its model file (python, pytorch, tensorrt); and config
 * settings that pick an interpreter or load native code (EXECUTION_ENV_PATH, model_operations).
 */

const CODE_FILE = /\.(py|pyc|pyo|pyd|pt|pth|pt2|so|dylib|dll|tgz|tar\.gz|sh|plan)$/i;
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
  return undefined;
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
