import { InvalidArgError } from '../core/errors.js';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/**
 * A request's model version string, read as Triton reads it (common.cc GetModelVersionFromString, std::stol):
 * '' means "latest" (undefined); a negative number, and anything that is not a 64-bit integer, is INVALID_ARG with
 * Triton's words. Where Triton's stol would take a leading integer ("1.5", "1abc", " 1" all read as 1), Nereid
 * refuses with the same words rather than serve a version the client did not name (docs/errors.md).
 */
export function parseVersionString(version: string | undefined): number | undefined {
  if (version === undefined || version === '') return undefined;
  const n = /^[+-]?[0-9]+$/.test(version) ? BigInt(version) : undefined;
  if (n === undefined || n < INT64_MIN || n > INT64_MAX) {
    throw new InvalidArgError(
      `failed to get model version from specified version string '${version}' (details: stol), version should be an integral value > 0`,
    );
  }
  if (n < 0n) {
    throw new InvalidArgError(`invalid model version specified '${version}' , version should be an integral value > 0`);
  }
  // Past 2^53 the number rounds, but no version folder is that large (scan.ts reads folder names as numbers too).
  return Number(n);
}
