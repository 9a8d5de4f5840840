import { CancelledError, InternalError, InvalidArgError, NereidError } from '../../../core/errors.js';
import { OrtStatusError } from './api.js';
import type { Tensor } from '../../../core/tensor.js';
import type { SessionTensor } from './session.js';

/**
 * A request's input checked against the session's: known name, datatype, shape. Checked here rather than by
 * onnxruntime: its failed runs leak a few KB each (1.30, measured; the JS binding too), and a malformed request is
 * the common failure.
 */
export function checkedInput(t: Tensor, s: SessionTensor | undefined): SessionTensor {
  if (s === undefined) throw new InvalidArgError(`unexpected inference input '${t.name}' for the model`);
  if (s.datatype !== t.datatype) {
    throw new InvalidArgError(`input '${t.name}': expected ${s.datatype}, got ${t.datatype}`);
  }
  if (t.shape.length !== s.dims.length || s.dims.some((d, k) => d >= 0 && d !== t.shape[k])) {
    throw new InvalidArgError(
      `input '${t.name}': the model expects shape [${s.dims.join(',')}], got [${t.shape.join(',')}]`,
    );
  }
  return s;
}

/** A failed run's error: CANCELLED when it was terminated, onnxruntime's invalid arguments INVALID_ARG, else INTERNAL. */
export function runError(err: unknown, terminated: boolean): NereidError {
  if (err instanceof NereidError) return err;
  if (terminated) return new CancelledError('the run was cancelled (onnxruntime terminated it)', { cause: err });
  if (err instanceof OrtStatusError) {
    const message = `onnxruntime: ${err.message}`;
    if (err.ortCode === 'ORT_INVALID_ARGUMENT') return new InvalidArgError(message, { cause: err });
    return new InternalError(message, { cause: err });
  }
  return NereidError.from(err);
}
