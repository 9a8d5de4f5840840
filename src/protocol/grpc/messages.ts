/**
 * TypeScript shapes of the GRPCInferenceService messages as @grpc/proto-loader hands them over (see
 * proto.ts for the options): snake_case names, int64/uint64 as decimal strings, bytes as Buffers,
 * absent scalars as defaults, an absent message as null, a oneof's member named by `parameter_choice`.
 * Only the messages the codec reads field by field are typed; the rest are built as plain objects.
 */

/** 64-bit integers as received (`longs: String`); numbers are accepted when we send. */
export type Long = string | number;

export interface InferParameterMsg {
  parameter_choice?: 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param';
  bool_param?: boolean;
  int64_param?: Long;
  string_param?: string;
  double_param?: number;
  uint64_param?: Long;
}

export type ParameterMap = Record<string, InferParameterMsg>;

export interface InferTensorContentsMsg {
  bool_contents: boolean[];
  int_contents: number[];
  int64_contents: Long[];
  uint_contents: number[];
  uint64_contents: Long[];
  fp32_contents: number[];
  fp64_contents: number[];
  bytes_contents: Uint8Array[];
}

export interface InferInputTensorMsg {
  name: string;
  datatype: string;
  shape: Long[];
  parameters: ParameterMap;
  contents: InferTensorContentsMsg | null;
}

export interface InferRequestedOutputTensorMsg {
  name: string;
  parameters: ParameterMap;
}

export interface ModelInferRequestMsg {
  model_name: string;
  model_version: string;
  id: string;
  parameters: ParameterMap;
  inputs: InferInputTensorMsg[];
  outputs: InferRequestedOutputTensorMsg[];
  raw_input_contents: Uint8Array[];
}

export interface InferOutputTensorMsg {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: ParameterMap;
}

export interface ModelInferResponseMsg {
  model_name: string;
  model_version: string;
  id: string;
  parameters?: ParameterMap;
  outputs: InferOutputTensorMsg[];
  raw_output_contents: Uint8Array[];
}

export interface ModelStreamInferResponseMsg {
  error_message: string;
  infer_response: ModelInferResponseMsg | null;
}

/** ModelRepositoryParameter: InferParameter's shape with bytes instead of double/uint64. */
export interface RepositoryParameterMsg {
  parameter_choice?: 'bool_param' | 'int64_param' | 'string_param' | 'bytes_param';
  bool_param?: boolean;
  int64_param?: Long;
  string_param?: string;
  bytes_param?: Uint8Array;
}

/** LogSettings' SettingValue. */
export interface LogSettingMsg {
  parameter_choice?: 'bool_param' | 'uint32_param' | 'string_param';
  bool_param?: boolean;
  uint32_param?: number;
  string_param?: string;
}
