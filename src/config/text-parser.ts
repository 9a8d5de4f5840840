/**
 * Protobuf text-format parser for ModelConfig, driven by the .proto through protobufjs reflection.
 *
 * protobufjs has no text format, so this is hand-written on top of text-lexer.ts. It follows the C++
 * TextFormat grammar that Triton uses to read config.pbtxt (optional ':' before messages, '{}' or '<>',
 * '[...]' lists, optional ',' / ';' separators, adjacent string concatenation, map entries as
 * `{ key: .. value: .. }`). Type problems (unknown field, bad enum, wrong scalar type, duplicates, oneof
 * conflicts) are collected and parsing goes on; a syntax error stops it, since the rest can't be trusted.
 */
import protobuf from 'protobufjs';
import { type ConfigError, configErrorsToException, suggestion } from './config-error.js';
import type { ModelConfig } from './model-config.js';
import { INT_RANGES, LONG_TYPES, enumOf, isMessageField, modelConfigType } from './schema.js';
import { Lexer, TextFormatSyntaxError, type Token } from './text-lexer.js';
import {
  BOOL_WORDS,
  FLOAT_WORDS,
  INTEGER,
  defaultKey,
  defaultScalar,
  describe,
  parseBigInt,
  setOwn,
} from './text-values.js';

/** What parsing a config produced: the config as far as it could be read, and every problem found. */
export interface ParseResult {
  config: ModelConfig;
  errors: ConfigError[];
}

type Obj = Record<string, unknown>;
const CLOSERS: Readonly<Record<string, string>> = { '{': '}', '<': '>' };

/**
 * Parses config.pbtxt text. Never throws for bad input: problems come back in `errors`, each with
 * file, line, column and field path (format them with formatConfigError).
 */
export function parseModelConfig(text: string, file: string): ParseResult {
  const { message, errors } = parseTextMessage(modelConfigType(), text, file);
  return { config: message as ModelConfig, errors };
}

/** Like parseModelConfig, but throws one InvalidArgError listing every problem. */
export function parseModelConfigOrThrow(text: string, file: string): ModelConfig {
  const { config, errors } = parseModelConfig(text, file);
  if (errors.length > 0) throw configErrorsToException(errors);
  return config;
}

/** Parses text format for any message type of the schema (the root path is the type's name). */
export function parseTextMessage(
  type: protobuf.Type,
  text: string,
  file: string,
): { message: Obj; errors: ConfigError[] } {
  const parser = new TextParser(new Lexer(text), file);
  const message: Obj = {};
  try {
    parser.parseFields(type, message, type.name, undefined);
  } catch (err) {
    if (!(err instanceof TextFormatSyntaxError)) throw err;
    parser.errors.push({ file, line: err.line, column: err.column, path: parser.lastPath, message: err.message });
  }
  return { message, errors: parser.errors };
}

class TextParser {
  readonly errors: ConfigError[] = [];
  lastPath = '';

  constructor(
    private readonly lexer: Lexer,
    private readonly file: string,
  ) {}

  private report(at: Token, path: string, message: string): void {
    this.errors.push({ file: this.file, line: at.line, column: at.column, path, message });
  }

  private syntax(at: Token, message: string): never {
    throw new TextFormatSyntaxError(message, at.line, at.column);
  }

  private accept(text: string): boolean {
    const t = this.lexer.peek();
    if (t.kind === 'punct' && t.text === text) {
      this.lexer.next();
      return true;
    }
    return false;
  }

  /** Reads fields into `obj` until the closing delimiter (or end of file at the top level). */
  parseFields(type: protobuf.Type, obj: Obj, path: string, open: Token | undefined): void {
    const close = open ? CLOSERS[open.text] : undefined;
    const seen = new Map<string, Token>();
    const oneofs = new Map<string, string>();
    while (true) {
      const t = this.lexer.peek();
      if (t.kind === 'eof') {
        if (!open) return;
        this.syntax(open, `unterminated message ${path}: '${open.text}' is never closed with '${close}'`);
      }
      if (close && t.kind === 'punct' && t.text === close) {
        this.lexer.next();
        return;
      }
      if (t.kind !== 'ident') {
        const what = t.text === '[' ? " (extensions and Any expansions aren't part of ModelConfig)" : '';
        this.syntax(t, `expected a field name in ${path}, got ${describe(t)}${what}`);
      }
      const nameTok = this.lexer.next();
      const name = nameTok.text;
      const field = type.fields[name];
      this.lastPath = `${path}.${name}`;
      if (!field) {
        const hint = suggestion(name, Object.keys(type.fields));
        this.report(nameTok, `${path}.${name}`, `unknown field '${name}' in ${type.name}${hint}`);
        this.skipValue();
      } else {
        this.checkOnce(type, field, nameTok, `${path}.${name}`, seen, oneofs);
        this.parseFieldValue(field, obj, `${path}.${name}`, nameTok);
      }
      if (!this.accept(',')) this.accept(';');
    }
  }

  private checkOnce(
    type: protobuf.Type,
    field: protobuf.Field,
    at: Token,
    path: string,
    seen: Map<string, Token>,
    oneofs: Map<string, string>,
  ): void {
    const first = seen.get(field.name);
    if (first && !field.repeated && !field.map) {
      const where = `${first.line}:${first.column}`;
      this.report(
        at,
        path,
        `duplicate field '${field.name}' in ${type.name} (first set at ${where}); it is not repeated, so set it once`,
      );
    }
    seen.set(field.name, at);
    const oneof = field.partOf;
    if (!oneof) return;
    const other = oneofs.get(oneof.name);
    if (other !== undefined && other !== field.name) {
      this.report(
        at,
        path,
        `field '${field.name}' conflicts with '${other}': both belong to oneof '${oneof.name}' in ${type.name}; set only one`,
      );
    }
    oneofs.set(oneof.name, field.name);
  }

  private parseFieldValue(field: protobuf.Field, obj: Obj, path: string, nameTok: Token): void {
    const many = field.repeated || field.map;
    if (field.map || isMessageField(field)) {
      this.accept(':');
      if (this.lexer.peek().text === '[' && this.lexer.peek().kind === 'punct') {
        this.lexer.next();
        if (!many) this.report(nameTok, path, `field '${field.name}' is not repeated; give one value, not a list`);
        if (field.repeated) obj[field.name] ??= [];
        this.parseList(() => this.parseMessageValue(field, obj, path));
      } else {
        this.parseMessageValue(field, obj, path);
      }
      return;
    }
    if (!this.accept(':'))
      this.syntax(this.lexer.peek(), `expected ':' after '${field.name}', got ${describe(this.lexer.peek())}`);
    const add = (value: unknown): void => {
      if (value === undefined) return;
      if (field.repeated) (obj[field.name] as unknown[]).push(value);
      else obj[field.name] = value;
    };
    if (field.repeated) obj[field.name] ??= [];
    if (this.lexer.peek().kind === 'punct' && this.lexer.peek().text === '[') {
      this.lexer.next();
      if (!field.repeated)
        this.report(nameTok, path, `field '${field.name}' is not repeated; give one value, not a list`);
      this.parseList(() => add(this.parseScalar(field.type, enumOf(field), path)));
    } else {
      add(this.parseScalar(field.type, enumOf(field), path));
    }
  }

  /** After '[': elements separated by ',' up to ']'. */
  private parseList(element: () => void): void {
    if (this.accept(']')) return;
    while (true) {
      element();
      if (this.accept(']')) return;
      if (!this.accept(','))
        this.syntax(this.lexer.peek(), `expected ',' or ']' in list, got ${describe(this.lexer.peek())}`);
    }
  }

  private parseMessageValue(field: protobuf.Field, obj: Obj, path: string): void {
    const open = this.lexer.peek();
    if (open.kind !== 'punct' || !(open.text in CLOSERS)) {
      const what = field.map ? 'map entry' : (field.resolvedType as protobuf.Type).name;
      if (open.kind === 'punct' || open.kind === 'eof')
        this.syntax(open, `expected '{' to start a ${what} for ${path}, got ${describe(open)}`);
      this.report(open, path, `expected a ${what} in '{ }' for ${path}, got ${describe(open)}`);
      this.skipValue();
      return;
    }
    this.lexer.next();
    if (field.map) {
      this.parseMapEntry(field as unknown as protobuf.MapField, obj, path, open);
      return;
    }
    const type = field.resolvedType as protobuf.Type;
    const child: Obj = {};
    if (field.repeated) {
      const list = (obj[field.name] ??= []) as unknown[];
      this.parseFields(type, child, `${path}[${list.length}]`, open);
      list.push(child);
    } else {
      this.parseFields(type, child, path, open);
      obj[field.name] = child;
    }
  }

  /** `{ key: K value: V }`; a missing key or value takes its default, as in protobuf. */
  private parseMapEntry(field: protobuf.MapField, obj: Obj, path: string, open: Token): void {
    const close = CLOSERS[open.text];
    let key: unknown;
    let value: unknown;
    while (!this.accept(close)) {
      const t = this.lexer.next();
      if (t.kind === 'eof')
        this.syntax(open, `unterminated map entry of ${path}: '${open.text}' is never closed with '${close}'`);
      if (t.kind === 'ident' && t.text === 'key') {
        if (!this.accept(':'))
          this.syntax(this.lexer.peek(), `expected ':' after 'key', got ${describe(this.lexer.peek())}`);
        key = this.parseScalar(field.keyType, undefined, `${path}.key`);
      } else if (t.kind === 'ident' && t.text === 'value') {
        value = this.parseMapValue(field, `${path}.value`);
      } else if (t.kind === 'ident') {
        this.report(
          t,
          `${path}.${t.text}`,
          `unknown field '${t.text}' in a map entry of ${path}; use 'key' and 'value'`,
        );
        this.skipValue();
      } else {
        this.syntax(t, `expected 'key' or 'value' in a map entry of ${path}, got ${describe(t)}`);
      }
      if (!this.accept(',')) this.accept(';');
    }
    const map = (obj[field.name] ??= {}) as Obj;
    const valueType = field.resolvedType;
    if (value === undefined) value = valueType instanceof protobuf.Type ? {} : defaultScalar(field.type, enumOf(field));
    setOwn(map, key === undefined ? defaultKey(field.keyType) : String(key), value);
  }

  private parseMapValue(field: protobuf.MapField, path: string): unknown {
    const valueType = field.resolvedType;
    if (!(valueType instanceof protobuf.Type)) {
      if (!this.accept(':'))
        this.syntax(this.lexer.peek(), `expected ':' after 'value', got ${describe(this.lexer.peek())}`);
      return this.parseScalar(field.type, enumOf(field), path);
    }
    this.accept(':');
    const open = this.lexer.next();
    if (open.kind !== 'punct' || !(open.text in CLOSERS)) {
      this.syntax(open, `expected '{' to start a ${valueType.name} for ${path}, got ${describe(open)}`);
    }
    const child: Obj = {};
    this.parseFields(valueType, child, path, open);
    return child;
  }

  /** One scalar or enum value; undefined (with an error recorded) when it has the wrong type. */
  private parseScalar(type: string, enumType: protobuf.Enum | undefined, path: string): unknown {
    let t = this.lexer.next();
    const negative = t.kind === 'punct' && t.text === '-';
    if (negative) t = this.lexer.next();
    if (t.kind === 'punct' || t.kind === 'eof') this.syntax(t, `expected a value for ${path}, got ${describe(t)}`);
    if (t.kind === 'string') {
      let value = t.value ?? '';
      while (this.lexer.peek().kind === 'string') value += this.lexer.next().value ?? '';
      if (type === 'string' || type === 'bytes') {
        if (!negative) return value;
      }
    }
    const fail = (what: string): undefined => {
      this.report(t, path, `expected ${what} for ${path}, got ${describe(t, negative)}`);
      return undefined;
    };
    if (enumType) return this.enumValue(t, negative, enumType, path);
    if (type === 'string' || type === 'bytes') return fail('a string');
    if (type === 'bool') {
      if (!negative && t.kind === 'ident' && t.text in BOOL_WORDS) return BOOL_WORDS[t.text];
      if (!negative && t.kind === 'number' && (t.text === '0' || t.text === '1')) return t.text === '1';
      return fail('true or false');
    }
    if (type === 'float' || type === 'double') {
      const word = t.kind === 'ident' ? FLOAT_WORDS[t.text.toLowerCase()] : undefined;
      const text = t.text.replace(/[fF]$/, '');
      let value: number | undefined = word;
      if (t.kind === 'number') value = /^0[xX]/.test(text) ? parseInt(text, 16) : Number(text);
      if (value === undefined) return fail('a number');
      return negative ? -value : value;
    }
    const range = INT_RANGES[type];
    if (!range) throw new Error(`unsupported field type '${type}' at ${path}`);
    if (t.kind !== 'number' || !INTEGER.test(t.text)) return fail('an integer');
    const big = parseBigInt(t.text) * (negative ? -1n : 1n);
    const shown = `${negative ? '-' : ''}${t.text}`;
    if (big < range[0] || big > range[1]) {
      this.report(t, path, `value ${shown} for ${path} is out of range for ${type} (${range[0]} to ${range[1]})`);
      return undefined;
    }
    if (LONG_TYPES.has(type) && (big > BigInt(Number.MAX_SAFE_INTEGER) || big < BigInt(Number.MIN_SAFE_INTEGER))) {
      this.report(
        t,
        path,
        `value ${shown} for ${path} is not a safe integer: Nereid keeps ${type} values as JS numbers, which are exact only within ±${Number.MAX_SAFE_INTEGER}`,
      );
      return undefined;
    }
    return Number(big);
  }

  private enumValue(t: Token, negative: boolean, enumType: protobuf.Enum, path: string): string | undefined {
    if (t.kind === 'ident' && !negative) {
      if (t.text in enumType.values) return t.text;
      const hint = suggestion(t.text, Object.keys(enumType.values));
      this.report(t, path, `unknown ${enumType.name} value '${t.text}' for ${path}${hint}`);
      return undefined;
    }
    if (t.kind === 'number' && INTEGER.test(t.text)) {
      const n = Number(parseBigInt(t.text)) * (negative ? -1 : 1);
      const name = enumType.valuesById[n];
      if (name !== undefined) return name;
      this.report(
        t,
        path,
        `${n} is not a ${enumType.name} value for ${path} (known: ${Object.keys(enumType.values).join(', ')})`,
      );
      return undefined;
    }
    this.report(t, path, `expected a ${enumType.name} name for ${path}, got ${describe(t, negative)}`);
    return undefined;
  }

  /** Skips the value of an unknown field so the parse can go on: `: scalar`, `{...}`, `<...>`, `[...]`. */
  private skipValue(): void {
    this.accept(':');
    const t = this.lexer.peek();
    if (t.kind === 'punct' && (t.text === '{' || t.text === '<' || t.text === '[')) {
      this.skipBalanced();
      return;
    }
    this.accept('-');
    const v = this.lexer.next();
    if (v.kind === 'punct' || v.kind === 'eof') this.syntax(v, `expected a value, got ${describe(v)}`);
    while (v.kind === 'string' && this.lexer.peek().kind === 'string') this.lexer.next();
  }

  private skipBalanced(): void {
    const open = this.lexer.next();
    const stack = [open];
    const pairs: Readonly<Record<string, string>> = { '{': '}', '<': '>', '[': ']' };
    while (stack.length > 0) {
      const t = this.lexer.next();
      if (t.kind === 'eof') this.syntax(stack[stack.length - 1], `'${stack[stack.length - 1].text}' is never closed`);
      if (t.kind !== 'punct') continue;
      if (t.text in pairs) stack.push(t);
      else if (t.text === '}' || t.text === '>' || t.text === ']') {
        const top = stack.pop() as Token;
        if (pairs[top.text] !== t.text)
          this.syntax(
            t,
            `expected '${pairs[top.text]}' to close '${top.text}' at ${top.line}:${top.column}, got '${t.text}'`,
          );
      }
    }
  }
}
