/**
 * The one datatype table: KServe name ↔ config enum ↔ TypedArray. Engine names (onnxruntime's, TensorRT's)
 * belong to each backend.
 * FP16/BF16 travel as Uint16Array of raw bits; BOOL as Uint8Array (0/1); BYTES as an array of Uint8Array.
 */

export type DataType =
  | 'BOOL'
  | 'UINT8'
  | 'UINT16'
  | 'UINT32'
  | 'UINT64'
  | 'INT8'
  | 'INT16'
  | 'INT32'
  | 'INT64'
  | 'FP16'
  | 'FP32'
  | 'FP64'
  | 'BF16'
  | 'BYTES';

export type FixedTypedArray =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | BigUint64Array
  | BigInt64Array
  | Float32Array
  | Float64Array;

export interface TypedArrayCtor {
  new (length: number): FixedTypedArray;
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): FixedTypedArray;
  readonly BYTES_PER_ELEMENT: number;
}

export interface DataTypeInfo {
  readonly name: DataType;
  /** Bytes per element; 0 for BYTES (variable). */
  readonly byteSize: number;
  /** ModelConfig enum name (`TYPE_FP32`; BYTES is `TYPE_STRING`). */
  readonly configName: string;
  /** Backing array for fixed-size types; undefined for BYTES. */
  readonly array: TypedArrayCtor | undefined;
}

const row = (
  name: DataType,
  byteSize: number,
  array: TypedArrayCtor | undefined,
  configName = `TYPE_${name}`,
): DataTypeInfo => Object.freeze({ name, byteSize, configName, array });

export const DATATYPES: Readonly<Record<DataType, DataTypeInfo>> = Object.freeze({
  BOOL: row('BOOL', 1, Uint8Array),
  UINT8: row('UINT8', 1, Uint8Array),
  UINT16: row('UINT16', 2, Uint16Array),
  UINT32: row('UINT32', 4, Uint32Array),
  UINT64: row('UINT64', 8, BigUint64Array as unknown as TypedArrayCtor),
  INT8: row('INT8', 1, Int8Array),
  INT16: row('INT16', 2, Int16Array),
  INT32: row('INT32', 4, Int32Array),
  INT64: row('INT64', 8, BigInt64Array as unknown as TypedArrayCtor),
  FP16: row('FP16', 2, Uint16Array),
  FP32: row('FP32', 4, Float32Array),
  FP64: row('FP64', 8, Float64Array),
  BF16: row('BF16', 2, Uint16Array),
  BYTES: row('BYTES', 0, undefined, 'TYPE_STRING'),
});

const BY_CONFIG_NAME: ReadonlyMap<string, DataTypeInfo> = new Map(
  Object.values(DATATYPES).map((d) => [d.configName, d] as const),
);
/** Every KServe datatype, in the table's order (backends that carry them all list this). */
export const ALL_DATATYPES: readonly DataType[] = Object.freeze(Object.keys(DATATYPES) as DataType[]);

export function isDataType(s: unknown): s is DataType {
  return typeof s === 'string' && Object.prototype.hasOwnProperty.call(DATATYPES, s);
}

/** `TYPE_FP32` → `FP32`; undefined for TYPE_INVALID or an unknown name. */
export function dataTypeFromConfig(configName: string): DataType | undefined {
  return BY_CONFIG_NAME.get(configName)?.name;
}
