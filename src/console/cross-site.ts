import type { IncomingMessage } from 'node:http';

/** Methods that only read: never refused, so a link or an image from another site still gets an answer. */
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Why a request is refused as cross-site, or undefined. Nereid sends no CORS headers, so no page from another
 * site can read its answers — but a browser still *sends* a "simple" cross-site POST (a form, `text/plain`), which
 * could load, unload or infer on behalf of a console user's browser. So a state-changing request is refused when
 * the browser says it came from another site:
 *
 * - `Sec-Fetch-Site` (sent by every current browser): only `same-origin` and `none` (typed by the user) pass;
 * - otherwise `Origin`, when present, must name the host the request was sent to (`Host`); `null` never passes.
 *
 * Clients that are not browsers (curl, tritonclient, the gRPC port) send neither header and are not affected.
 */
export function crossSiteRefusal(req: IncomingMessage): string | undefined {
  if (SAFE.has(req.method ?? 'GET')) return undefined;
  const site = header(req, 'sec-fetch-site');
  if (site !== undefined) {
    if (site === 'same-origin' || site === 'none') return undefined;
    return `cross-site request refused (Sec-Fetch-Site: ${site}); call this server from its own pages or from a non-browser client`;
  }
  const origin = header(req, 'origin');
  if (origin === undefined) return undefined;
  let host: string | undefined;
  try {
    host = origin === 'null' ? undefined : new URL(origin).host;
  } catch {
    host = undefined;
  }
  if (host !== undefined && host === header(req, 'host')) return undefined;
  return `cross-site request refused (Origin: ${origin}); call this server from its own pages or from a non-browser client`;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
