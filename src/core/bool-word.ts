/**
 * The words a boolean option takes, in flags, backend configs and model parameters alike: Triton's
 * true/false, on/off, 1/0, and yes/no (any case, surrounding spaces ignored). Undefined for anything else, so
 * that each caller refuses it in its own terms (the flag, the key, the parameter).
 */
export function boolWord(value: string): boolean | undefined {
  const v = value.trim().toLowerCase();
  if (v === 'true' || v === '1' || v === 'on' || v === 'yes') return true;
  if (v === 'false' || v === '0' || v === 'off' || v === 'no') return false;
  return undefined;
}
