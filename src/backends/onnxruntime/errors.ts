import { InvalidArgError, NereidError, UnsupportedError } from '../../core/errors.js';
import { OrtStatusError } from './capi/api.js';
import { providerError } from './capi/providers.js';
import type { ProviderPlan } from './options-capi.js';

/** What an onnxruntime failure means for Nereid: whose fault a failed session is, and which run errors are fatal. */

/** A session that failed to create: the model or an option is the operator's to fix, a provider's failure is not. */
export function createError(err: unknown, providers: readonly ProviderPlan[], where: string): NereidError {
  if (err instanceof NereidError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const gpu = providers.find((p) => p.name !== 'openvino');
  if (gpu !== undefined && /CUDA|cuda|cudnn|CUBLAS|cublas|TensorRT|nvinfer|device|GPU/.test(message)) {
    return providerError(gpu.name, where, err);
  }
  if (err instanceof OrtStatusError && err.ortCode === 'ORT_NOT_IMPLEMENTED') {
    return new UnsupportedError(`${where}: onnxruntime cannot run this model: ${message}`, { cause: err });
  }
  return new InvalidArgError(`${where}: onnxruntime could not load the model: ${message}`, { cause: err });
}

/**
 * Errors after which an instance must not run again: CUDA's sticky errors leave the device context unusable for
 * the process. An out-of-memory error is not sticky (the request fails, the instance keeps serving).
 */
const STICKY =
  /illegal memory access|illegal address|unspecified launch failure|device-side assert|misaligned address|cudaErrorLaunchFailure|CUDA failure 7[0-9]{2}|CUDA error.*(?:700|719|710|716)/i;

export function isStickyError(err: unknown): boolean {
  return STICKY.test(err instanceof Error ? err.message : String(err));
}
