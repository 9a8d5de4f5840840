/**
 * ModelConfig: protobuf text format parse/print, the JSON form Triton serves and accepts, and validation.
 * Everything here is pure (no I/O): callers read files and pass the text in.
 */
export type * from './model-config.js';
export { type ConfigError, formatConfigError, configErrorsToException } from './config-error.js';
export { type ParseResult, parseModelConfig, parseModelConfigOrThrow } from './text-parser.js';
export { printModelConfig } from './text-printer.js';
export { modelConfigToJson, modelConfigFromJson, readModelConfigJson } from './json.js';
export { type ValidateOptions, validateModelConfig } from './validate.js';
export { finalizeConfig, type NormalizedConfig } from './model-config.js';
