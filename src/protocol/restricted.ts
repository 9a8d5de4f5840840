import { InvalidArgError } from '../core/errors.js';

/**
 * Triton's restricted APIs (`--http-restricted-api`, `--grpc-restricted-protocol`): each API category may demand a
 * header with an exact value; a request without it is refused before anything else is looked at (HTTP 403, gRPC
 * UNAVAILABLE, "This API is restricted, expecting header '<key>'"). One table of categories for both protocols;
 * every route and rpc names its category, so an endpoint added later cannot skip the check.
 */

/** Triton's category names, in its order (restricted_features.h). */
export const API_CATEGORIES = [
  'health',
  'metadata',
  'inference',
  'shared-memory',
  'model-config',
  'model-repository',
  'statistics',
  'trace',
  'logging',
] as const;

export type ApiCategory = (typeof API_CATEGORIES)[number];

/** What a restricted category demands: a header (lower-case, as both protocols deliver names) and its exact value. */
export interface Restriction {
  /** The header as the operator named it (for messages). */
  readonly header: string;
  /** The header name lower-cased, for lookups. */
  readonly key: string;
  readonly value: string;
}

/** The restrictions of one protocol; categories not listed are open. */
export type Restrictions = ReadonlyMap<ApiCategory, Restriction>;

export const NO_RESTRICTIONS: Restrictions = new Map();

/** The header prefix Triton puts before a `--grpc-restricted-protocol` key. */
export const GRPC_RESTRICTED_HEADER_PREFIX = 'triton-grpc-protocol-';

/**
 * Parses `<api>[,<api>...]:<key>=<value>` entries (Triton's format and start-up errors). `flag` is the option's name
 * for messages; `kind` is Triton's word in them ('api' for HTTP, 'protocol' for gRPC); `prefix` is prepended to every
 * key (gRPC's `triton-grpc-protocol-`).
 */
export function parseRestrictions(
  entries: readonly string[],
  opts: { flag: string; kind: 'api' | 'protocol'; prefix?: string },
): Restrictions {
  const out = new Map<ApiCategory, Restriction>();
  for (const entry of entries) {
    const colon = entry.indexOf(':');
    const eq = colon < 0 ? -1 : entry.indexOf('=', colon + 1);
    const apis = colon < 0 ? '' : entry.slice(0, colon);
    const key = eq < 0 ? '' : entry.slice(colon + 1, eq);
    const value = eq < 0 ? '' : entry.slice(eq + 1);
    if (apis === '' || key === '' || value === '') {
      throw new InvalidArgError(`--${opts.flag} option format is '<api list>:<key>=<value>'. Got ${entry}`);
    }
    const header = `${opts.prefix ?? ''}${key}`;
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(header)) {
      throw new InvalidArgError(`--${opts.flag}: '${key}' is not a valid header name`);
    }
    for (const api of apis.split(',').map((a) => a.trim())) {
      if (!(API_CATEGORIES as readonly string[]).includes(api)) {
        throw new InvalidArgError(
          `unknown restricted ${opts.kind} '${api}' (--${opts.flag}; known: ${API_CATEGORIES.join(', ')})`,
        );
      }
      if (out.has(api as ApiCategory)) {
        throw new InvalidArgError(`restricted ${opts.kind} '${api}' can not be specified in multiple config groups`);
      }
      out.set(api as ApiCategory, Object.freeze({ header, key: header.toLowerCase(), value }));
    }
  }
  return out;
}

/** The message of a refusal (Triton's wording: HTTP says "API", gRPC "protocol"). */
export function restrictedMessage(r: Restriction, word: 'API' | 'protocol'): string {
  return `This ${word} is restricted, expecting header '${r.header}'`;
}

/**
 * The restriction that refuses a request to `category`, or undefined when the request may go on (the category is
 * open, or the request carries the header with exactly the value). `get` reads one header by lower-case name; a
 * repeated header passes only when every copy has the value.
 */
export function refusedBy(
  restrictions: Restrictions,
  category: ApiCategory,
  get: (key: string) => string | readonly string[] | undefined,
): Restriction | undefined {
  const r = restrictions.get(category);
  if (r === undefined) return undefined;
  const v = get(r.key);
  const values = v === undefined ? [] : typeof v === 'string' ? [v] : v;
  return values.length > 0 && values.every((x) => x === r.value) ? undefined : r;
}
