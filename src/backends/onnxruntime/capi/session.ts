import koffi from 'koffi';
import type { DataType } from '../../../core/datatypes.js';
import { CancelledError, UnsupportedError } from '../../../core/errors.js';
import type { ModelSignature, TensorSignature } from '../../contract.js';
import { callAsync, callVoidAsync, check, ortApi, type Out, type Ptr } from './api.js';
import { dataTypeOfElement, elementTypeName } from './tensors.js';

/**
 * One OrtSession and the names of its inputs and outputs.
 *
 * Ownership: the session owns the OrtSession and the name strings onnxruntime allocated for it (kept as native
 * pointers because every run passes them back); `release()` frees both, exactly once, after the caller made sure
 * no run is in flight. Creation and release run on libuv's thread pool: both take milliseconds (graph
 * optimization; joining the session's threads).
 */

/** One input or output of the session: its name (as JavaScript and as onnxruntime's C string) and signature. */
export interface SessionTensor extends TensorSignature {
  readonly namePtr: Ptr;
}

export class OrtSession {
  readonly ptr: Ptr;
  readonly inputs: readonly SessionTensor[];
  readonly outputs: readonly SessionTensor[];
  readonly #allocator: Ptr;
  #released = false;

  private constructor(ptr: Ptr, allocator: Ptr, inputs: SessionTensor[], outputs: SessionTensor[]) {
    this.ptr = ptr;
    this.#allocator = allocator;
    this.inputs = inputs;
    this.outputs = outputs;
  }

  /**
   * Creates a session on a pool thread. `options` must stay alive until this settles (the caller releases them
   * afterwards). An abort asks onnxruntime to stop loading (load cancellation flag); the promise then rejects
   * with CANCELLED and nothing is left behind.
   */
  static async create(env: Ptr, modelPath: string, options: Ptr, signal?: AbortSignal): Promise<OrtSession> {
    const api = ortApi();
    if (signal?.aborted) throw new CancelledError('model load was cancelled');
    const out: Out = [null];
    const onAbort = (): void => void api.SessionOptionsSetLoadCancellationFlag(options, true);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await callAsync(api.CreateSession, env, modelPath, options, out);
    } catch (err) {
      if (signal?.aborted) throw new CancelledError('model load was cancelled', { cause: err });
      throw err;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    const ptr = out[0] as Ptr;
    const allocatorOut: Out = [null];
    const names: Ptr[] = [];
    try {
      if (signal?.aborted) throw new CancelledError('model load was cancelled');
      check(api.GetAllocatorWithDefaultOptions(allocatorOut));
      const allocator = allocatorOut[0] as Ptr;
      const inputs = readTensors(ptr, allocator, 'input', names);
      const outputs = readTensors(ptr, allocator, 'output', names);
      return new OrtSession(ptr, allocator, inputs, outputs);
    } catch (err) {
      for (const n of names) api.AllocatorFree(allocatorOut[0], n);
      await callVoidAsync(api.ReleaseSession, ptr);
      throw err;
    }
  }

  signature(): ModelSignature {
    const plain = (t: SessionTensor): TensorSignature => ({ name: t.name, datatype: t.datatype, dims: [...t.dims] });
    return { inputs: this.inputs.map(plain), outputs: this.outputs.map(plain) };
  }

  /** Frees the names and the session (on a pool thread). Idempotent; never call with a run in flight. */
  async release(): Promise<void> {
    if (this.#released) return;
    this.#released = true;
    const api = ortApi();
    for (const t of [...this.inputs, ...this.outputs]) check(api.AllocatorFree(this.#allocator, t.namePtr));
    await callVoidAsync(api.ReleaseSession, this.ptr);
  }
}

const u64 = new BigUint64Array(1);
const i32 = new Int32Array(1);

/**
 * Names and signatures of the session's inputs or outputs. Every name pointer is pushed to `names` as soon as it
 * is allocated, so the caller frees them if a later one fails.
 */
function readTensors(session: Ptr, allocator: Ptr, kind: 'input' | 'output', names: Ptr[]): SessionTensor[] {
  const api = ortApi();
  const input = kind === 'input';
  check((input ? api.SessionGetInputCount : api.SessionGetOutputCount)(session, u64));
  const count = Number(u64[0]);
  const out: Out = [null];
  const tensors: SessionTensor[] = [];
  for (let i = 0; i < count; i++) {
    check((input ? api.SessionGetInputName : api.SessionGetOutputName)(session, i, allocator, out));
    const namePtr = out[0] as Ptr;
    names.push(namePtr);
    const name = koffi.decode(namePtr, 'char', -1) as string;
    check((input ? api.SessionGetInputTypeInfo : api.SessionGetOutputTypeInfo)(session, i, out));
    const typeInfo = out[0] as Ptr;
    try {
      check(api.GetOnnxTypeFromTypeInfo(typeInfo, i32));
      // ONNXType: 1 = tensor; sequences, maps, optionals and sparse tensors have no KServe form.
      if (i32[0] !== 1) {
        const kinds = ['unknown', 'tensor', 'sequence', 'map', 'opaque', 'sparse tensor', 'optional'];
        throw new UnsupportedError(
          `${kind} '${name}' is a ${kinds[i32[0]] ?? 'non-tensor'}, which Nereid does not support`,
        );
      }
      check(api.CastTypeInfoToTensorInfo(typeInfo, out));
      const info = out[0] as Ptr; // owned by typeInfo
      check(api.GetTensorElementType(info, i32));
      const datatype: DataType | undefined = dataTypeOfElement(i32[0]);
      if (datatype === undefined) {
        throw new UnsupportedError(
          `${kind} '${name}' has ONNX type ${elementTypeName(i32[0])}, which Nereid does not support`,
        );
      }
      check(api.GetDimensionsCount(info, u64));
      const rank = Number(u64[0]);
      const dims = new BigInt64Array(Math.max(rank, 1));
      check(api.GetDimensions(info, dims, rank));
      // A symbolic or unknown dim reads as -1.
      tensors.push({
        name,
        namePtr,
        datatype,
        dims: Array.from(dims.subarray(0, rank), (d) => (d >= 0n ? Number(d) : -1)),
      });
    } finally {
      api.ReleaseTypeInfo(typeInfo);
    }
  }
  return tensors;
}
