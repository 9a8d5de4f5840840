/**
 * Loads proto/model_config.proto once, by reflection, so the text-format parser, the printer and the JSON
 * form all follow the .proto instead of hand-kept field tables that could drift from it.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

let cachedRoot: protobuf.Root | undefined;

/**
 * The package root: the nearest folder above this module that holds package.json. Walking up (rather
 * than a fixed `../..`) keeps it right both from `src/config/` under tsx and from `dist/config/` after build.
 */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`cannot find package.json above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
  return dir;
}

/** Path of our own proto/model_config.proto. */
export function modelConfigProtoPath(): string {
  return join(packageRoot(), 'proto', 'model_config.proto');
}

/** The resolved protobufjs root for package `inference` (field names kept in snake_case). */
export function modelConfigRoot(): protobuf.Root {
  if (!cachedRoot) {
    const root = new protobuf.Root();
    root.loadSync(modelConfigProtoPath(), { keepCase: true });
    root.resolveAll();
    cachedRoot = root;
  }
  return cachedRoot;
}

/** A message type of the model config schema, e.g. `ModelConfig` or `ModelInput`. */
export function configType(name: string): protobuf.Type {
  return modelConfigRoot().lookupType(`inference.${name}`);
}

/** The `inference.ModelConfig` message type. */
export function modelConfigType(): protobuf.Type {
  return configType('ModelConfig');
}

/** 64-bit integer kinds: the parser turns them into JS numbers and must reject unsafe values. */
export const LONG_TYPES: ReadonlySet<string> = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);
/** Integer kinds with their inclusive ranges (64-bit ones limited to safe JS integers). */
export const INT_RANGES: Readonly<Record<string, readonly [bigint, bigint]>> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  sint32: [-(2n ** 31n), 2n ** 31n - 1n],
  sfixed32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  fixed32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  sint64: [-(2n ** 63n), 2n ** 63n - 1n],
  sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
  fixed64: [0n, 2n ** 64n - 1n],
};

/** Whether a field holds a message (a nested message or the value of a message-valued map). */
export function isMessageField(field: protobuf.FieldBase): boolean {
  return field.resolvedType instanceof protobuf.Type;
}

/** The enum a field holds, if any. */
export function enumOf(field: protobuf.FieldBase): protobuf.Enum | undefined {
  return field.resolvedType instanceof protobuf.Enum ? field.resolvedType : undefined;
}
