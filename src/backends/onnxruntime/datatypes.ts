import type { DataType } from '../../core/datatypes.js';

/**
 * onnxruntime-node's tensor type name of each KServe datatype this engine can run. BF16 is missing: onnxruntime-node
 * has no tensor type for it.
 */
export const ORT_TYPES: Readonly<Partial<Record<DataType, string>>> = Object.freeze({
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string',
});

const BY_ORT = new Map(Object.entries(ORT_TYPES).map(([k, v]) => [v, k as DataType]));

/** The datatypes the engine runs, for the registry. */
export const ORT_DATATYPES: readonly DataType[] = Object.freeze(Object.keys(ORT_TYPES) as DataType[]);

/** onnxruntime-node's type name (`float32`) → KServe datatype. */
export function dataTypeFromOrt(ortName: string): DataType | undefined {
  return BY_ORT.get(ortName);
}
