import type { IncomingMessage, ServerResponse } from 'node:http';
import { InvalidArgError } from '../../core/errors.js';
import { API_CATEGORIES, type ApiCategory, type Restrictions } from '../restricted.js';
import type { Route } from './routes.js';

/**
 * CORS as an operator's allow-list (`--http-cors-allow-origin`, off by default; Triton has none). Without it no page
 * of another origin can read an answer, and state-changing calls from one are refused (console/cross-site.ts). An
 * entry names one origin and the API categories (restricted.ts's names) it may call; an allowed origin gets the
 * CORS headers for those routes and is let past the cross-site refusal for them, nothing more: restricted APIs
 * still demand their header, other categories stay closed to it, and the web console is never opened to it.
 *
 * - `https://app.example.com`: the client's data path, DEFAULT_CORS_APIS;
 * - `inference,model-repository=https://admin.example.com`: exactly those categories;
 * - `*` as the origin: any origin, answered `Access-Control-Allow-Origin: *` and never with credentials (a named
 *   origin is echoed back with `Access-Control-Allow-Credentials: true`, so a page behind a cookie-based proxy works).
 */

/** What an entry without a list of APIs allows: what a client needs to check a model and run it. */
export const DEFAULT_CORS_APIS: readonly ApiCategory[] = [
  'health',
  'metadata',
  'model-config',
  'inference',
  'statistics',
];

/** One allowed origin (`*`: any) and its categories. Plain data: it crosses to front-end threads. */
export interface CorsRule {
  readonly origin: string;
  readonly apis: readonly ApiCategory[];
}

export type CorsPolicy = readonly CorsRule[];

/** Request headers the KServe and Triton routes read (binary tensor data, compressed bodies). */
const REQUEST_HEADERS = ['Content-Type', 'Content-Encoding', 'Accept-Encoding', 'Inference-Header-Content-Length'];
/** Response headers a page may read beyond the CORS-safelisted ones: where binary tensor data starts. */
const EXPOSED_HEADERS = 'Inference-Header-Content-Length';
/** Seconds a browser may cache a preflight answer. */
const PREFLIGHT_MAX_AGE = 600;

/** Parses `[<api>[,<api>...]=]<origin>` entries; a bad one fails start-up naming the flag. */
export function parseCorsOrigins(entries: readonly string[]): CorsPolicy {
  return entries.map((entry): CorsRule => {
    const eq = entry.lastIndexOf('=');
    const origin = entry.slice(eq + 1);
    const apis =
      eq < 0
        ? DEFAULT_CORS_APIS
        : entry
            .slice(0, eq)
            .split(',')
            .map((a) => a.trim());
    for (const api of apis) {
      if (!(API_CATEGORIES as readonly string[]).includes(api)) {
        throw new InvalidArgError(
          `unknown API '${api}' in --http-cors-allow-origin '${entry}' (known: ${API_CATEGORIES.join(', ')})`,
        );
      }
    }
    if (origin !== '*' && serialized(origin) !== origin) {
      throw new InvalidArgError(
        `--http-cors-allow-origin '${entry}': '${origin}' is not an origin; write <scheme>://<host>[:<port>] (no path, no trailing slash) or *`,
      );
    }
    return Object.freeze({ origin, apis: Object.freeze([...(apis as ApiCategory[])]) });
  });
}

function serialized(origin: string): string | undefined {
  try {
    const u = new URL(origin);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Applies the policy to one request before routing. `preflight`: an OPTIONS preflight of an allowed origin was
 * answered (204, the route's methods and the headers it reads, plus the restricted headers of the origin's categories
 * so that the real request may carry them). `allowed`: the origin may call this route; the CORS headers are set and the cross-site
 * refusal does not apply. `none`: CORS does not apply (no Origin, an origin or category not listed, a path outside
 * Triton's table).
 */
export function applyCors(
  policy: CorsPolicy,
  req: IncomingMessage,
  res: ServerResponse,
  routes: readonly Route[],
  restrictions: Restrictions,
): 'preflight' | 'allowed' | 'none' {
  const origin = req.headers.origin;
  if (policy.length === 0 || origin === undefined) return 'none';
  // Answers differ by Origin: caches must keep them apart.
  res.setHeader('Vary', 'Origin');
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const route = routes.find((r) => r.pattern.test(path));
  if (route === undefined) return 'none';
  const rule =
    policy.find((r) => r.origin === origin && r.apis.includes(route.category)) ??
    policy.find((r) => r.origin === '*' && r.apis.includes(route.category));
  if (rule === undefined) return 'none';
  res.setHeader('Access-Control-Allow-Origin', rule.origin === '*' ? '*' : origin);
  if (rule.origin !== '*') res.setHeader('Access-Control-Allow-Credentials', 'true');
  if (req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) {
    // The restricted headers of every category the origin may call: a client sends its headers with every call.
    const restricted = new Set(rule.apis.flatMap((api) => restrictions.get(api)?.header ?? []));
    res.setHeader('Access-Control-Allow-Methods', Object.keys(route.methods).join(', '));
    res.setHeader('Access-Control-Allow-Headers', [...REQUEST_HEADERS, ...restricted].join(', '));
    res.setHeader('Access-Control-Max-Age', String(PREFLIGHT_MAX_AGE));
    res.statusCode = 204;
    res.end();
    return 'preflight';
  }
  res.setHeader('Access-Control-Expose-Headers', EXPOSED_HEADERS);
  return 'allowed';
}
