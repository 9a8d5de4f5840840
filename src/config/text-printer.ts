/**
 * Prints a ModelConfig back to protobuf text format. The output is canonical (fields in field-number order,
 * two-space indent, repeated scalars as `[a, b]` lists, one block per message and map entry) and re-parses
 * to the same object, so configs can be stored, diffed and shown the way users write them.
 */
import protobuf from 'protobufjs';
import { InvalidArgError } from '../core/errors.js';
import { suggestion } from './config-error.js';
import type { ModelConfig } from './model-config.js';
import { enumOf, modelConfigType } from './schema.js';

type Obj = Record<string, unknown>;

/** Canonical text format of a ModelConfig; throws InvalidArgError for fields or values the schema lacks. */
export function printModelConfig(config: ModelConfig): string {
  return printTextMessage(modelConfigType(), config as Obj);
}

/** Text format of any message type of the schema. */
export function printTextMessage(type: protobuf.Type, message: Obj): string {
  const lines: string[] = [];
  printFields(type, message, '', type.name, lines);
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}

function printFields(type: protobuf.Type, obj: Obj, indent: string, path: string, out: string[]): void {
  for (const key of Object.keys(obj)) {
    if (!type.fields[key] && obj[key] !== undefined) {
      throw new InvalidArgError(
        `cannot print ${path}: unknown field '${key}' in ${type.name}${suggestion(key, Object.keys(type.fields))}`,
      );
    }
  }
  const fields = [...type.fieldsArray].sort((a, b) => a.id - b.id);
  for (const field of fields) {
    const value = obj[field.name];
    if (value === undefined || value === null) continue;
    const fieldPath = `${path}.${field.name}`;
    if (field.map) printMap(field as unknown as protobuf.MapField, value, indent, fieldPath, out);
    else if (field.repeated) printRepeated(field, value, indent, fieldPath, out);
    else if (field.resolvedType instanceof protobuf.Type)
      printMessage(field.name, field.resolvedType, value, indent, fieldPath, out);
    else out.push(`${indent}${field.name}: ${formatScalar(field.type, enumOf(field), value, fieldPath)}`);
  }
}

function printMessage(
  name: string,
  type: protobuf.Type,
  value: unknown,
  indent: string,
  path: string,
  out: string[],
): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidArgError(`cannot print ${path}: expected a ${type.name} object, got ${JSON.stringify(value)}`);
  }
  const inner: string[] = [];
  printFields(type, value as Obj, `${indent}  `, path, inner);
  if (inner.length === 0) out.push(`${indent}${name} {}`);
  else out.push(`${indent}${name} {`, ...inner, `${indent}}`);
}

function printRepeated(field: protobuf.FieldBase, value: unknown, indent: string, path: string, out: string[]): void {
  if (!Array.isArray(value))
    throw new InvalidArgError(`cannot print ${path}: expected a list, got ${JSON.stringify(value)}`);
  const type = field.resolvedType;
  if (type instanceof protobuf.Type) {
    value.forEach((item, i) => printMessage(field.name, type, item, indent, `${path}[${i}]`, out));
    return;
  }
  const items = value.map((item, i) => formatScalar(field.type, enumOf(field), item, `${path}[${i}]`));
  out.push(`${indent}${field.name}: [${items.join(', ')}]`);
}

function printMap(field: protobuf.MapField, value: unknown, indent: string, path: string, out: string[]): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidArgError(`cannot print ${path}: expected an object (map), got ${JSON.stringify(value)}`);
  }
  for (const [key, item] of Object.entries(value as Obj)) {
    const entryPath = `${path}[${JSON.stringify(key)}]`;
    const keyText =
      field.keyType === 'string'
        ? quote(key)
        : formatScalar(field.keyType, undefined, mapKey(field.keyType, key, entryPath), entryPath);
    out.push(`${indent}${field.name} {`, `${indent}  key: ${keyText}`);
    const type = field.resolvedType;
    if (type instanceof protobuf.Type) printMessage('value', type, item, `${indent}  `, entryPath, out);
    else out.push(`${indent}  value: ${formatScalar(field.type, enumOf(field), item, entryPath)}`);
    out.push(`${indent}}`);
  }
}

function mapKey(keyType: string, key: string, path: string): unknown {
  if (keyType === 'bool') return key === 'true';
  if (!/^-?\d+$/.test(key)) throw new InvalidArgError(`cannot print ${path}: map key '${key}' is not an integer`);
  return Number(key);
}

function formatScalar(type: string, enumType: protobuf.Enum | undefined, value: unknown, path: string): string {
  const bad = (what: string): never => {
    throw new InvalidArgError(`cannot print ${path}: expected ${what}, got ${JSON.stringify(value)}`);
  };
  if (enumType) {
    if (typeof value === 'string' && value in enumType.values) return value;
    if (typeof value === 'number' && enumType.valuesById[value] !== undefined) return enumType.valuesById[value];
    return bad(`a ${enumType.name} name`);
  }
  switch (type) {
    case 'string':
    case 'bytes':
      return typeof value === 'string' ? quote(value) : bad('a string');
    case 'bool':
      return typeof value === 'boolean' ? String(value) : bad('true or false');
    case 'float':
    case 'double':
      if (typeof value !== 'number') return bad('a number');
      if (Number.isNaN(value)) return 'nan';
      if (!Number.isFinite(value)) return value > 0 ? 'inf' : '-inf';
      return String(value);
    default:
      return typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : bad('an integer');
  }
}

/** A double-quoted text-format string; control characters as octal escapes, other characters as UTF-8. */
function quote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (code < 0x20 || code === 0x7f) out += `\\${code.toString(8).padStart(3, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}
