import { InvalidArgError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';

const encoder = new TextEncoder();

/** C++ std::to_string formatting, which Triton uses for the value: 6 decimals for floats, plain for integers. */
function formatValue(v: number | bigint, isFloat: boolean): string {
  return isFloat ? (v as number).toFixed(6) : String(v);
}

/**
 * Triton's classification extension: replaces an output by a BYTES tensor of the top `k` entries per
 * batch item, each `"<value>:<index>[:<label>]"`, highest first (shape [batch, k], or [k] without batching).
 */
export function classify(t: Tensor, k: number, batching: boolean, labels: readonly string[] | undefined): Tensor {
  if (Array.isArray(t.data) || t.datatype === 'BYTES') {
    throw new InvalidArgError(`output '${t.name}': classification needs a numeric output, got ${t.datatype}`);
  }
  if (t.datatype === 'FP16' || t.datatype === 'BF16') {
    throw new InvalidArgError(`output '${t.name}': classification of ${t.datatype} outputs is not supported`);
  }
  const data = t.data;
  const batch = batching ? (t.shape[0] ?? 1) : 1;
  const per = batch === 0 ? 0 : data.length / batch;
  const take = Math.min(k, per);
  const isFloat = t.datatype === 'FP32' || t.datatype === 'FP64';
  const out: Uint8Array[] = [];
  for (let b = 0; b < batch; b++) {
    const idx = Array.from({ length: per }, (_, i) => i);
    const at = (i: number): number | bigint => data[b * per + i];
    idx.sort((x, y) => {
      const a = at(x);
      const c = at(y);
      return a < c ? 1 : a > c ? -1 : x - y;
    });
    for (let j = 0; j < take; j++) {
      const i = idx[j];
      const label = labels?.[i];
      const s = `${formatValue(at(i), isFloat)}:${i}${label !== undefined && label !== '' ? `:${label}` : ''}`;
      out.push(encoder.encode(s));
    }
  }
  return { name: t.name, datatype: 'BYTES', shape: batching ? [batch, take] : [take], data: out };
}
