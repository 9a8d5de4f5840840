import { InvalidArgError } from '../../core/errors.js';

/** trtexec's shapes, `name:1x512,other:1x3x224x224` (a trailing comma, as in the seed's trtexec call, is fine); `flag` names
 * where they came from in messages (`--min-shapes`, `parameter min_shapes`). Shared by `nereid convert` and ONNX loads. */
export function parseShapes(flag: string, raw: string): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const part of raw.split(',')) {
    const p = part.trim();
    if (p === '') continue;
    const at = p.lastIndexOf(':');
    if (at <= 0) throw new InvalidArgError(`${flag}: '${p}' is not name:DIMxDIM...`);
    const name = p.slice(0, at).replace(/^['"]|['"]$/g, '');
    const dims = p
      .slice(at + 1)
      .split('x')
      .map((d) => Number(d));
    if (dims.length === 0 || dims.some((d) => !Number.isSafeInteger(d) || d < 0)) {
      throw new InvalidArgError(`${flag}: '${p}': dims must be non-negative integers separated by 'x'`);
    }
    if (out.has(name)) throw new InvalidArgError(`${flag}: input '${name}' is given twice`);
    out.set(name, dims);
  }
  return out;
}
