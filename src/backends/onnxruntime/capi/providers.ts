import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidArgError, UnavailableError, type NereidError } from '../../../core/errors.js';
import type { ProviderPlan } from '../options-capi.js';
import { check, ortApi, OrtStatusError, type Out, type Ptr } from './api.js';
import { ortLibraryDir } from './library.js';

/**
 * Appending execution providers to session options (provider options V2), and turning a provider that cannot
 * load into an UNAVAILABLE error that names the missing library and how to get it. Never a silent CPU fall-back:
 * any failure here fails the instance's load.
 *
 * onnxruntime loads `libonnxruntime_providers_<name>.so` from the folder of the `libonnxruntime` it runs from
 * when the provider's options are created or appended; that library in turn needs CUDA/cuDNN (and TensorRT's
 * libnvinfer) from the system library path.
 */

const ORT_GPU_VERSION = '1.30.0';

/** How to get the provider libraries `files` into `dir`. */
const howToGet = (files: readonly string[], dir: string): string =>
  `copy ${files.join(', ')} from the onnxruntime/capi/ folder of the onnxruntime-gpu ${ORT_GPU_VERSION} wheel ` +
  `(PyPI) into ${dir}, beside libonnxruntime.so.1 (\`nereid gpu setup\` does this for the CUDA provider)`;

/** What each provider needs beside libonnxruntime, and how to get what it needs from the system. */
const PROVIDER_LIBS: Record<ProviderPlan['name'], { files: string[]; system: string }> = {
  cuda: {
    files: ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_cuda.so'],
    system:
      'the CUDA 13 and cuDNN 9 libraries (libcudart.so.13, libcublas.so.13, libcublasLt.so.13, libcufft.so.12, ' +
      'libcurand.so.10, libcudnn.so.9) must resolve: install them system-wide or put the lib folders of the ' +
      'nvidia-*-cu13 pip wheels on LD_LIBRARY_PATH',
  },
  tensorrt: {
    files: [
      'libonnxruntime_providers_shared.so',
      'libonnxruntime_providers_tensorrt.so',
      'libonnxruntime_providers_cuda.so',
    ],
    system:
      'TensorRT 10 (libnvinfer.so.10, libnvinfer_plugin.so.10, libnvonnxparser.so.10) for CUDA 13 must resolve: ' +
      'install TensorRT 10.x and put its lib folder on LD_LIBRARY_PATH',
  },
  openvino: {
    files: ['libonnxruntime_providers_shared.so', 'libonnxruntime_providers_openvino.so'],
    system: 'OpenVINO (libopenvino.so) must resolve',
  },
};

/**
 * The error for a provider that failed to load or configure: UNAVAILABLE with the library that is missing (from
 * onnxruntime's own message when it names one) and how to get it; INVALID_ARG for an option onnxruntime refused.
 */
export function providerError(provider: ProviderPlan['name'], where: string, err: unknown): NereidError {
  const message = (err instanceof Error ? err.message : String(err)).trim();
  const dir = ortLibraryDir();
  const needs = PROVIDER_LIBS[provider];
  const missingFiles = needs.files.filter((f) => !existsSync(join(dir, f)));
  // dlopen's own words: "libfoo.so.N: cannot open shared object file: No such file or directory".
  const dl = /([\w.+-]+\.so[\w.]*): cannot open shared object file/.exec(message);
  const label = provider === 'cuda' ? 'CUDA' : provider === 'tensorrt' ? 'TensorRT' : 'OpenVINO';
  if (
    missingFiles.length > 0 ||
    dl !== null ||
    /Failed to load|not (?:enabled|supported) in this build|is not available/i.test(message)
  ) {
    const missing = dl?.[1] ?? missingFiles[0];
    let how: string;
    if (missing !== undefined && missingFiles.includes(missing) && provider !== 'openvino') {
      how = howToGet(needs.files, dir);
    } else if (provider === 'openvino') {
      how =
        'onnxruntime-node ships no OpenVINO execution provider; serve this model without ' +
        'cpu_execution_accelerator openvino, or point NEREID_ORT_LIB_DIR at an onnxruntime build with OpenVINO';
    } else {
      how = needs.system;
    }
    const what = missing !== undefined ? `the library '${missing}' is missing` : 'it cannot be loaded';
    return new UnavailableError(
      `${where}: the ${label} execution provider is unavailable: ${what}; ${how} (onnxruntime: ${message})`,
      { cause: err },
    );
  }
  if (err instanceof OrtStatusError && err.ortCode === 'ORT_INVALID_ARGUMENT') {
    return new InvalidArgError(`${where}: onnxruntime refused a ${label} provider option: ${message}`, { cause: err });
  }
  return new UnavailableError(`${where}: the ${label} execution provider failed: ${message}`, { cause: err });
}

/** Appends `plan`'s provider to `options` (OrtSessionOptions*). Throws providerError's errors. */
export function appendProvider(options: Ptr, plan: ProviderPlan, where: string): void {
  const api = ortApi();
  const keys = plan.options.map(([k]) => k);
  const values = plan.options.map(([, v]) => v);
  const out: Out = [null];
  try {
    if (plan.name === 'openvino') {
      check(api.SessionOptionsAppendExecutionProvider_OpenVINO_V2(options, keys, values, keys.length));
      return;
    }
    const cuda = plan.name === 'cuda';
    check((cuda ? api.CreateCUDAProviderOptions : api.CreateTensorRTProviderOptions)(out));
    const providerOptions = out[0] as Ptr;
    try {
      if (keys.length > 0) {
        const update = cuda ? api.UpdateCUDAProviderOptions : api.UpdateTensorRTProviderOptions;
        check(update(providerOptions, keys, values, keys.length));
      }
      const append = cuda
        ? api.SessionOptionsAppendExecutionProvider_CUDA_V2
        : api.SessionOptionsAppendExecutionProvider_TensorRT_V2;
      check(append(options, providerOptions));
    } finally {
      (cuda ? api.ReleaseCUDAProviderOptions : api.ReleaseTensorRTProviderOptions)(providerOptions);
    }
  } catch (err) {
    throw providerError(plan.name, where, err);
  }
}
