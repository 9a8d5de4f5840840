import { DATATYPES, type DataType } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';

const INT64_MAX = 2n ** 63n - 1n;

/**
 * A request input's shape whose dims are all non-negative integers, some perhaps past 2^53 (bigint: JSON literals
 * and gRPC int64 stay exact). Returns it as numbers when its element count is a safe integer; otherwise refuses it
 * with Triton's words (http_server.cc): the element count past int64, then the byte size past int64 (Triton's
 * L0_http test_buffer_size_overflow pins both), and past that what Nereid can count exactly (2^53 - 1 elements;
 * Triton would go on to compare the byte size with the body's).
 */
export function checkShapeSize(name: string, dims: readonly (number | bigint)[], datatype: DataType): number[] {
  let exact = true;
  for (const d of dims) if (typeof d === 'bigint') exact = false;
  if (exact) {
    let n = 1;
    for (const d of dims) n *= d as number;
    if (Number.isSafeInteger(n)) return dims as number[];
  }
  const shape = `[${dims.join(',')}]`;
  const count = dims.reduce<bigint>((n, d) => n * BigInt(d), 1n);
  const tooMany = (max: bigint): InvalidArgError =>
    new InvalidArgError(
      `invalid shape for input '${name}': shape ${shape} causes total element count to exceed maximum size of ${max}`,
    );
  if (count > INT64_MAX) throw tooMany(INT64_MAX);
  const size = BigInt(DATATYPES[datatype].byteSize);
  if (size > 0n && count * size > INT64_MAX) {
    throw new InvalidArgError(
      `byte size overflow for input '${name}': element count (${count}) * data type size (${size}) exceeds maximum allowed size (${INT64_MAX})`,
    );
  }
  if (count > BigInt(Number.MAX_SAFE_INTEGER)) throw tooMany(BigInt(Number.MAX_SAFE_INTEGER));
  // The count is safe (a zero dim beside a huge one): every dim must still be a number Nereid holds exactly.
  if (!exact) {
    throw new InvalidArgError(
      `invalid shape for input '${name}': shape ${shape} has a dimension past ${Number.MAX_SAFE_INTEGER}, the largest Nereid holds exactly`,
    );
  }
  return dims as number[];
}
