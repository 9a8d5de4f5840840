import { existsSync } from 'node:fs';
import { join } from 'node:path';
import koffi, { type IKoffiLib } from 'koffi';
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
  `(PyPI) into ${dir}, beside libonnxruntime.so.1 (\`nereid gpu setup\` installs them)`;

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
      'TensorRT 10 (libnvinfer.so.10, libnvinfer_plugin.so.10) must resolve through the system library path: ' +
      '`nereid tensorrt setup` installs TensorRT 10.6 (it builds on Hopper); start Nereid with the folder holding ' +
      "libnvinfer.so.10 (env.json's ld_library_path in $NEREID_TENSORRT_HOME) on LD_LIBRARY_PATH, and onnxruntime's " +
      'CUDA provider libraries beside its TensorRT provider',
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

/** TensorRT's runtime: onnxruntime's TensorRT provider library needs it (DT_NEEDED) and dlopens it by name. */
export const NVINFER = 'libnvinfer.so.10';

/** Libraries loaded by the check below, kept referenced: koffi would unload them with the object. */
const probed = new Map<string, IKoffiLib>();

/** Whether the dynamic linker finds and loads `name` as onnxruntime's provider will (by name, system path). */
function loadsByName(name: string): boolean {
  if (probed.has(name)) return true;
  try {
    probed.set(name, koffi.load(name));
    return true;
  } catch {
    return false;
  }
}

/**
 * What a GPU provider needs that is not there, checked before onnxruntime is asked (never relying on onnxruntime to
 * notice: the Python API of onnxruntime falls back to the CPU when the TensorRT provider cannot start, and a
 * TensorRT provider without the CUDA provider library beside it is such a case): its provider libraries beside
 * libonnxruntime (the TensorRT provider needs the CUDA one too: its fall-back and its allocator), then TensorRT's
 * libnvinfer. Undefined when all are there. `loads` is a test hook.
 */
export function missingProviderLibrary(
  provider: ProviderPlan['name'],
  dir: string = ortLibraryDir(),
  loads: (name: string) => boolean = loadsByName,
): string | undefined {
  if (provider === 'openvino') return undefined;
  const file = PROVIDER_LIBS[provider].files.find((f) => !existsSync(join(dir, f)));
  if (file !== undefined) return file;
  if (provider === 'tensorrt' && !loads(NVINFER)) return NVINFER;
  return undefined;
}

/** The UNAVAILABLE error for a provider library found missing before onnxruntime was asked. */
export function missingLibraryError(provider: ProviderPlan['name'], where: string, missing: string): NereidError {
  const dir = ortLibraryDir();
  const needs = PROVIDER_LIBS[provider];
  const how = needs.files.includes(missing) ? howToGet(needs.files, dir) : needs.system;
  const label = provider === 'cuda' ? 'CUDA' : 'TensorRT';
  return new UnavailableError(
    `${where}: the ${label} execution provider is unavailable: the library '${missing}' is missing; ${how} ` +
      '(Nereid refuses to run a KIND_GPU instance on the CPU instead)',
  );
}

/**
 * Appends `plan`'s provider to `options` (OrtSessionOptions*). Throws providerError's errors. Returns, for the
 * CUDA and TensorRT providers, the options as onnxruntime holds them (its Get*ProviderOptionsAsString, every
 * option with its value): what the log shows at verbose level, so an option's arrival is observable.
 */
export function appendProvider(options: Ptr, plan: ProviderPlan, where: string): string | undefined {
  const api = ortApi();
  const keys = plan.options.map(([k]) => k);
  const values = plan.options.map(([, v]) => v);
  const out: Out = [null];
  const missing = missingProviderLibrary(plan.name);
  if (missing !== undefined) throw missingLibraryError(plan.name, where, missing);
  try {
    if (plan.name === 'openvino') {
      check(api.SessionOptionsAppendExecutionProvider_OpenVINO_V2(options, keys, values, keys.length));
      return undefined;
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
      return optionsAsString(providerOptions, cuda);
    } finally {
      (cuda ? api.ReleaseCUDAProviderOptions : api.ReleaseTensorRTProviderOptions)(providerOptions);
    }
  } catch (err) {
    throw providerError(plan.name, where, err);
  }
}

/**
 * onnxruntime's "key=value;..." text of a provider options struct (the string freed with its allocator). Only
 * for the log: a failure to read it back is told in the text, never a load error.
 */
function optionsAsString(providerOptions: Ptr, cuda: boolean): string {
  const api = ortApi();
  const allocator: Out = [null];
  const text: Out = [null];
  try {
    check(api.GetAllocatorWithDefaultOptions(allocator));
    const get = cuda ? api.GetCUDAProviderOptionsAsString : api.GetTensorRTProviderOptionsAsString;
    check(get(providerOptions, allocator[0], text));
    return koffi.decode(text[0], 'char', -1) as string;
  } catch (err) {
    return `(not readable: ${(err as Error).message})`;
  } finally {
    if (text[0] !== null) api.AllocatorFree(allocator[0], text[0]);
  }
}
