/** Value-level helpers of the text-format parser: literal words, integer syntax, defaults, token display. */
import type protobuf from 'protobufjs';
import type { Token } from './text-lexer.js';

export const INTEGER = /^(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)$/;
export const FLOAT_WORDS: Readonly<Record<string, number>> = { inf: Infinity, infinity: Infinity, nan: NaN };
export const BOOL_WORDS: Readonly<Record<string, boolean>> = {
  true: true,
  True: true,
  t: true,
  false: false,
  False: false,
  f: false,
};

/** Sets an own enumerable property even for keys like `__proto__` (map keys come from user text). */
export function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** How a token is shown in "got ..." messages. */
export function describe(token: Token, negative = false): string {
  if (token.kind === 'eof') return 'end of file';
  if (token.kind === 'string') return token.text;
  if (token.kind === 'punct') return `'${token.text}'`;
  return JSON.stringify((negative ? '-' : '') + token.text);
}

/** Decimal, hex (0x) or octal (leading 0) integer text. */
export function parseBigInt(text: string): bigint {
  if (/^0[xX]/.test(text)) return BigInt(text);
  if (/^0[0-7]+$/.test(text)) return BigInt(`0o${text.slice(1)}`);
  return BigInt(text);
}

/** The key a map entry without `key` gets. */
export function defaultKey(keyType: string): string {
  if (keyType === 'string') return '';
  return keyType === 'bool' ? 'false' : '0';
}

/** The value a map entry without `value` gets. */
export function defaultScalar(type: string, enumType: protobuf.Enum | undefined): unknown {
  if (enumType) return enumType.valuesById[0];
  if (type === 'string' || type === 'bytes') return '';
  return type === 'bool' ? false : 0;
}
