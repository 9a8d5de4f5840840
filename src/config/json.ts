/**
 * The JSON form of ModelConfig: what Triton serves at GET /v2/models/<m>/config and accepts as the `config`
 * override of a load request.
 */
import protobuf from 'protobufjs';
import { type ConfigError, configErrorsToException, suggestion } from './config-error.js';
import type { ModelConfig } from './model-config.js';
import { INT_RANGES, LONG_TYPES, enumOf, modelConfigType } from './schema.js';

type Obj = Record<string, unknown>;

/**
 * Triton's JSON for a config: proto field names, every field printed (scalars at their defaults, empty
 * repeated fields as [], empty maps as {}, enums by name), nested messages and oneof members only when set,
 * and 64-bit integers as JSON numbers (protobuf's JSON would quote them; Triton rewrites them to numbers).
 * Non-finite floats become "NaN" / "Infinity" / "-Infinity" as in protobuf JSON.
 */
export function modelConfigToJson(config: ModelConfig): Obj {
  const type = modelConfigType();
  // protobufjs fills the defaults; it prints unset message fields as null, which tidy() drops.
  const full = type.toObject(type.fromObject(config as Obj), {
    enums: String,
    longs: Number,
    defaults: true,
    arrays: true,
    objects: true,
    oneofs: false,
  });
  return tidy(type, full);
}

/** Field order of the .proto, null (unset message) fields dropped, non-finite floats as strings. */
function tidy(type: protobuf.Type, obj: Obj): Obj {
  const out: Obj = {};
  for (const field of type.fieldsArray) {
    const value = obj[field.name];
    if (value === undefined || value === null) continue;
    const item = (v: unknown): unknown => tidyValue(field, v);
    if (field.map) out[field.name] = Object.fromEntries(Object.entries(value as Obj).map(([k, v]) => [k, item(v)]));
    else if (field.repeated) out[field.name] = (value as unknown[]).map(item);
    else out[field.name] = item(value);
  }
  return out;
}

function tidyValue(field: protobuf.FieldBase, value: unknown): unknown {
  if (field.resolvedType instanceof protobuf.Type) return tidy(field.resolvedType, value as Obj);
  if (typeof value === 'number' && !Number.isFinite(value)) {
    if (Number.isNaN(value)) return 'NaN';
    return value > 0 ? 'Infinity' : '-Infinity';
  }
  return value;
}

/**
 * Reads the JSON `config` of a load request (an object, or the JSON text) like Triton's JsonToModelConfig:
 * proto or lowerCamelCase field names, enums by name (case-insensitive) or number, 64-bit integers as
 * numbers or strings, null meaning "not set", and unknown fields rejected. Throws one InvalidArgError
 * listing every problem, each naming the field path; `source` names where the JSON came from.
 */
export function modelConfigFromJson(json: unknown, source: string): ModelConfig {
  const { config, errors } = readModelConfigJson(json, source);
  if (errors.length > 0) throw configErrorsToException(errors);
  return config;
}

/** Like modelConfigFromJson, but returns the problems instead of throwing. */
export function readModelConfigJson(json: unknown, source: string): { config: ModelConfig; errors: ConfigError[] } {
  const errors: ConfigError[] = [];
  const report = (path: string, message: string): void => {
    errors.push({ file: source, line: 0, column: 0, path, message });
  };
  let value = json;
  if (typeof json === 'string') {
    try {
      value = JSON.parse(json);
    } catch (err) {
      report('ModelConfig', `model config is not valid JSON: ${(err as Error).message}`);
      return { config: {}, errors };
    }
  }
  const type = modelConfigType();
  const config = readMessage(type, value, type.name, report) as ModelConfig;
  return { config, errors };
}

type Report = (path: string, message: string) => void;

const camel = (name: string): string => name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

function readMessage(type: protobuf.Type, value: unknown, path: string, report: Report): Obj {
  const out: Obj = {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    report(path, `expected a JSON object for ${path} (${type.name}), got ${JSON.stringify(value)}`);
    return out;
  }
  const byName = new Map<string, protobuf.Field>();
  for (const field of type.fieldsArray) {
    byName.set(field.name, field);
    byName.set(camel(field.name), field);
  }
  const oneofs = new Map<string, string>();
  for (const [key, raw] of Object.entries(value as Obj)) {
    const field = byName.get(key);
    const fieldPath = `${path}.${key}`;
    if (!field) {
      report(
        fieldPath,
        `unknown field '${key}' in ${type.name} at ${path}${suggestion(key, Object.keys(type.fields))}`,
      );
      continue;
    }
    if (field.name in out) {
      report(
        fieldPath,
        `field '${field.name}' of ${path} is given twice (as '${field.name}' and '${camel(field.name)}')`,
      );
      continue;
    }
    if (raw === null) continue;
    const oneof = field.partOf;
    if (oneof) {
      const other = oneofs.get(oneof.name);
      if (other !== undefined) {
        report(
          fieldPath,
          `field '${field.name}' conflicts with '${other}': both belong to oneof '${oneof.name}' in ${type.name}; set only one`,
        );
        continue;
      }
      oneofs.set(oneof.name, field.name);
    }
    const result = readField(field, raw, `${path}.${field.name}`, report);
    if (result !== undefined) out[field.name] = result;
  }
  return out;
}

function readField(field: protobuf.FieldBase, raw: unknown, path: string, report: Report): unknown {
  const one = (v: unknown, p: string): unknown =>
    field.resolvedType instanceof protobuf.Type
      ? readMessage(field.resolvedType, v, p, report)
      : readScalar(field.type, enumOf(field), v, p, report);
  if (field.map) {
    if (typeof raw !== 'object' || Array.isArray(raw)) {
      report(path, `expected a JSON object (map) for ${path}, got ${JSON.stringify(raw)}`);
      return undefined;
    }
    const keyType = (field as unknown as protobuf.MapField).keyType;
    const out: Obj = {};
    for (const [k, v] of Object.entries(raw as Obj)) {
      const p = `${path}[${JSON.stringify(k)}]`;
      if (keyType !== 'string' && readScalar(keyType, undefined, k, p, report) === undefined) continue;
      const item = one(v, p);
      if (item !== undefined)
        Object.defineProperty(out, k, { value: item, enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  if (field.repeated) {
    if (!Array.isArray(raw)) {
      report(path, `expected a JSON array for ${path}, got ${JSON.stringify(raw)}`);
      return undefined;
    }
    return raw.map((v, i) => one(v, `${path}[${i}]`)).filter((v) => v !== undefined);
  }
  return one(raw, path);
}

function readScalar(
  type: string,
  enumType: protobuf.Enum | undefined,
  raw: unknown,
  path: string,
  report: Report,
): unknown {
  const fail = (what: string): undefined => {
    report(path, `expected ${what} for ${path}, got ${JSON.stringify(raw)}`);
    return undefined;
  };
  if (enumType) {
    if (typeof raw === 'string') {
      const name = Object.keys(enumType.values).find((n) => n.toLowerCase() === raw.toLowerCase());
      if (name) return name;
      report(
        path,
        `unknown ${enumType.name} value '${raw}' for ${path}${suggestion(raw, Object.keys(enumType.values))}`,
      );
      return undefined;
    }
    if (typeof raw === 'number' && enumType.valuesById[raw] !== undefined) return enumType.valuesById[raw];
    return fail(`a ${enumType.name} name`);
  }
  switch (type) {
    case 'string':
    case 'bytes':
      return typeof raw === 'string' ? raw : fail('a string');
    case 'bool':
      if (typeof raw === 'boolean') return raw;
      if (raw === 'true' || raw === 'false') return raw === 'true';
      return fail('true or false');
    case 'float':
    case 'double': {
      if (typeof raw === 'number') return raw;
      const words: Record<string, number> = { NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity };
      if (typeof raw === 'string' && raw in words) return words[raw];
      if (typeof raw === 'string' && raw.trim() !== '' && Number.isFinite(Number(raw))) return Number(raw);
      return fail('a number');
    }
  }
  const range = INT_RANGES[type];
  if (!range) throw new Error(`unsupported field type '${type}' at ${path}`);
  let big: bigint;
  if (typeof raw === 'number' && Number.isInteger(raw)) big = BigInt(raw);
  else if (typeof raw === 'string' && /^-?\d+$/.test(raw)) big = BigInt(raw);
  else return fail('an integer');
  if (big < range[0] || big > range[1]) return fail(`an integer in range for ${type} (${range[0]} to ${range[1]})`);
  if (LONG_TYPES.has(type) && (big > BigInt(Number.MAX_SAFE_INTEGER) || big < BigInt(Number.MIN_SAFE_INTEGER))) {
    return fail(
      `a safe integer (${type} values are kept as JS numbers, exact only within ±${Number.MAX_SAFE_INTEGER})`,
    );
  }
  if (typeof raw === 'number' && !Number.isSafeInteger(raw)) return fail('a safe integer');
  return Number(big);
}
