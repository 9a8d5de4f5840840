/**
 * Answer checks: a candidate config must compute what the default config computes on the same requests, or a
 * faster config that answers something else would win. Integers, booleans and BYTES compare exactly; floats within
 * a per-datatype tolerance, |got − want| ≤ atol + rtol·|want|, stated in the report.
 */
import type { DataType } from '../../core/datatypes.js';
import { bf16BitsToFloat, halfBitsToFloat } from '../../core/half.js';
import type { NereidHttpClient, OutputTensor } from '../../client/index.js';
import type { TuneRequest } from './inputs.js';

/** rtol and atol per float datatype: a reordered reduction (batching, threads) moves the last bits only. */
export const TOLERANCES: Readonly<Partial<Record<DataType, { rtol: number; atol: number }>>> = Object.freeze({
  FP64: { rtol: 1e-9, atol: 1e-12 },
  FP32: { rtol: 1e-4, atol: 1e-5 },
  FP16: { rtol: 1e-2, atol: 1e-3 },
  BF16: { rtol: 2e-2, atol: 1e-2 },
});

/** The outputs of every request, in order. */
export type Answers = readonly (readonly OutputTensor[])[];

export async function collectAnswers(
  client: NereidHttpClient,
  model: string,
  requests: readonly TuneRequest[],
  signal?: AbortSignal,
): Promise<Answers> {
  const out: OutputTensor[][] = [];
  for (const r of requests) out.push([...(await client.infer(model, r, { signal })).outputs]);
  return out;
}

function asNumbers(t: OutputTensor): number[] | string[] {
  if (Array.isArray(t.data)) return t.data.map((b) => Buffer.from(b).toString('latin1'));
  const data = t.data;
  if (t.datatype === 'FP16') return Array.from(data as Uint16Array, halfBitsToFloat);
  if (t.datatype === 'BF16') return Array.from(data as Uint16Array, bf16BitsToFloat);
  return Array.from(data as ArrayLike<number | bigint>, Number);
}

/** The first difference between two outputs, or undefined when they agree. */
function compareTensor(want: OutputTensor, got: OutputTensor | undefined, where: string): string | undefined {
  if (got === undefined) return `${where}: output '${want.name}' is missing`;
  if (got.datatype !== want.datatype)
    return `${where}: '${want.name}' is ${got.datatype}, the default's is ${want.datatype}`;
  if (got.shape.join(',') !== want.shape.join(',')) {
    return `${where}: '${want.name}' has shape [${got.shape}], the default's [${want.shape}]`;
  }
  const a = asNumbers(want);
  const b = asNumbers(got);
  const tol = TOLERANCES[want.datatype];
  for (let i = 0; i < a.length; i++) {
    const w = a[i];
    const g = b[i];
    const same =
      tol === undefined || typeof w === 'string'
        ? w === g
        : Math.abs((g as number) - w) <= tol.atol + tol.rtol * Math.abs(w) || (Number.isNaN(w) && Number.isNaN(g));
    if (!same) return `${where}: '${want.name}'[${i}] is ${String(g)}, the default config answers ${String(w)}`;
  }
  return undefined;
}

/** Why `got` differs from the default's answers, or undefined when every output agrees. */
export function compareAnswers(want: Answers, got: Answers): string | undefined {
  for (let r = 0; r < want.length; r++) {
    for (const t of want[r]) {
      const diff = compareTensor(
        t,
        got[r]?.find((o) => o.name === t.name),
        `request ${r}`,
      );
      if (diff !== undefined) return diff;
    }
  }
  return undefined;
}

/** The tolerance rule as the report states it. */
export function toleranceText(): string {
  const floats = Object.entries(TOLERANCES)
    .map(([dt, t]) => `${dt} rtol ${t.rtol}, atol ${t.atol}`)
    .join('; ');
  return `integers, BOOL and BYTES exact; floats |got − want| ≤ atol + rtol·|want| (${floats})`;
}
