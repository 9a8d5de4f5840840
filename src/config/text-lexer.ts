/**
 * Tokenizer for protobuf text format (config.pbtxt).
 *
 * Hand-written because protobufjs reads .proto schemas and the binary/JSON encodings but has no text format,
 * and we want every token to carry its line and column so errors can point at the exact spot.
 * Tokens are produced lazily so problems found before a lexical error are still reported.
 */

export type TokenKind = 'ident' | 'number' | 'string' | 'punct' | 'eof';

export interface Token {
  kind: TokenKind;
  /** The source text of the token (for strings: including quotes). */
  text: string;
  /** Strings only: the decoded value. */
  value?: string;
  /** 1-based position of the first character. */
  line: number;
  column: number;
}

/** A lexical or syntax error: the parser stops at it. */
export class TextFormatSyntaxError extends Error {
  constructor(
    message: string,
    readonly line: number,
    readonly column: number,
  ) {
    super(message);
  }
}

const PUNCT = new Set(['{', '}', '<', '>', '[', ']', ':', ',', ';', '-']);
const IDENT = /[A-Za-z_][A-Za-z0-9_]*/y;
const NUMBER = /(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?)/y;
const SIMPLE_ESCAPES: Readonly<Record<string, number>> = {
  n: 10,
  t: 9,
  r: 13,
  a: 7,
  b: 8,
  f: 12,
  v: 11,
  '\\': 92,
  "'": 39,
  '"': 34,
  '?': 63,
};
const utf8 = new TextEncoder();

/** A pull tokenizer with one token of lookahead. */
export class Lexer {
  private pos = 0;
  private line = 1;
  private lineStart = 0;
  private lookahead: Token | undefined;

  constructor(private readonly src: string) {}

  /** The next token without consuming it. */
  peek(): Token {
    this.lookahead ??= this.scan();
    return this.lookahead;
  }

  /** Consumes and returns the next token. */
  next(): Token {
    const token = this.peek();
    this.lookahead = undefined;
    return token;
  }

  private scan(): Token {
    this.skipSpaceAndComments();
    const line = this.line;
    const column = this.pos - this.lineStart + 1;
    if (this.pos >= this.src.length) return { kind: 'eof', text: '', line, column };
    const ch = this.src[this.pos];
    if (ch === '"' || ch === "'") return this.scanString(line, column);
    if (PUNCT.has(ch)) {
      this.pos++;
      return { kind: 'punct', text: ch, line, column };
    }
    const ident = this.match(IDENT);
    if (ident) return { kind: 'ident', text: ident, line, column };
    const number = this.match(NUMBER);
    if (number) {
      const rest = this.match(/[A-Za-z0-9_.]+/y);
      if (rest) throw new TextFormatSyntaxError(`invalid number '${number}${rest}'`, line, column);
      return { kind: 'number', text: number, line, column };
    }
    throw new TextFormatSyntaxError(`unexpected character '${ch}'`, line, column);
  }

  private match(re: RegExp): string | undefined {
    re.lastIndex = this.pos;
    const m = re.exec(this.src);
    if (!m || m[0] === '') return undefined;
    this.pos += m[0].length;
    return m[0];
  }

  private skipSpaceAndComments(): void {
    while (this.pos < this.src.length) {
      const ch = this.src[this.pos];
      if (ch === '\n') {
        this.pos++;
        this.line++;
        this.lineStart = this.pos;
      } else if (ch === ' ' || ch === '\t' || ch === '\r' || ch === '\f' || ch === '\v') {
        this.pos++;
      } else if (ch === '#') {
        while (this.pos < this.src.length && this.src[this.pos] !== '\n') this.pos++;
      } else {
        return;
      }
    }
  }

  /**
   * Text-format strings are byte strings: escapes like \377 name bytes, not characters. So the value is
   * built as bytes and decoded as UTF-8 at the end.
   */
  private scanString(line: number, column: number): Token {
    const start = this.pos;
    const quote = this.src[this.pos++];
    const bytes: number[] = [];
    const bad = (message: string): never => {
      throw new TextFormatSyntaxError(message, line, this.pos - this.lineStart);
    };
    while (true) {
      if (this.pos >= this.src.length || this.src[this.pos] === '\n') {
        throw new TextFormatSyntaxError('unterminated string: missing closing quote before end of line', line, column);
      }
      const ch = this.src[this.pos++];
      if (ch === quote) break;
      if (ch !== '\\') {
        const cp = this.src.codePointAt(this.pos - 1) ?? 0;
        if (cp > 0xffff) this.pos++;
        bytes.push(...utf8.encode(String.fromCodePoint(cp)));
        continue;
      }
      const esc = this.src[this.pos++] ?? '';
      if (esc in SIMPLE_ESCAPES) {
        bytes.push(SIMPLE_ESCAPES[esc]);
      } else if (/[0-7]/.test(esc)) {
        const digits = esc + (this.src.slice(this.pos, this.pos + 2).match(/^[0-7]{0,2}/)?.[0] ?? '');
        this.pos += digits.length - 1;
        const value = parseInt(digits, 8);
        if (value > 255) bad(`octal escape '\\${digits}' is larger than a byte`);
        bytes.push(value);
      } else if (esc === 'x' || esc === 'X') {
        const digits = this.src.slice(this.pos, this.pos + 2).match(/^[0-9a-fA-F]{1,2}/)?.[0];
        if (!digits) bad(`'\\x' must be followed by hex digits`);
        this.pos += digits!.length;
        bytes.push(parseInt(digits!, 16));
      } else if (esc === 'u' || esc === 'U') {
        const len = esc === 'u' ? 4 : 8;
        const digits = this.src.slice(this.pos, this.pos + len);
        if (!new RegExp(`^[0-9a-fA-F]{${len}}$`).test(digits)) bad(`'\\${esc}' must be followed by ${len} hex digits`);
        this.pos += len;
        const cp = parseInt(digits, 16);
        if (cp > 0x10ffff) bad(`'\\${esc}${digits}' is not a Unicode code point`);
        bytes.push(...utf8.encode(String.fromCodePoint(cp)));
      } else {
        bad(`unknown escape '\\${esc}' in string`);
      }
    }
    const value = Buffer.from(bytes).toString('utf8');
    return { kind: 'string', text: this.src.slice(start, this.pos), value, line, column };
  }
}
