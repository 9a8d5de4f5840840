import type { IncomingMessage } from 'node:http';
import { printModelConfig } from '../config/index.js';
import { InvalidArgError, NotFoundError } from '../core/errors.js';
import { NEREID_VERSION } from '../core/version.js';
import { send, sendJson } from '../protocol/http/respond.js';
import type { Handler, Route, RouteContext } from '../protocol/http/routes.js';
import { loadAssets, type Asset } from './assets.js';
import { readTuneReport } from './tune-report.js';
import type { LatencySummary } from './latency-window.js';

/** Triton's restricted-API categories of what the console's own endpoints show. */
export type ConsoleCategory = 'model-config' | 'logging' | 'statistics';

/**
 * The console's answer to the restricted-API rules: given a request and the category of what it asks for, why it
 * is refused (answered 403), or undefined. With front-end threads it runs on the main thread and is given the
 * request's `method`, `url` and `headers` only. The console's actions themselves (load, unload, infer) are the server's
 * own /v2 endpoints and pass those rules there; this covers the three read-only endpoints only the console has.
 */
export type ConsoleAccess = (req: IncomingMessage, category: ConsoleCategory) => string | undefined;

/** Recent log lines (a LogRing; on a front-end thread, one that asks the main thread's ring). */
export interface ConsoleLogSource {
  readonly capacity: number;
  json(after?: number): string;
}

/** Request latencies (a LatencyWindow; on a front-end thread, one that asks the main thread's window). */
export interface ConsoleLatencySource {
  summary(windowMs: number): LatencySummary[];
}

/**
 * What the console shows, as serve() holds it on the main thread. Front-end threads (src/frontend/) get the same
 * shape with sources that call the main thread, so there is one ring, one window and one access rule per process.
 */
export interface ConsoleSources {
  /** `--model-control-mode`: the console offers load and unload only in explicit mode. */
  modelControlMode: 'none' | 'poll' | 'explicit';
  /** Recent log lines; without it (an embedder's own logger) the log page says none are kept. */
  logs?: ConsoleLogSource;
  /** Request latencies, fed by the server's observer. */
  latency: ConsoleLatencySource;
  access?: ConsoleAccess;
  /** The model repositories, where the console finds the report `nereid tune --write` left in a model's folder. */
  repositories?: readonly string[];
}

export interface ConsoleOptions extends ConsoleSources {
  /** The files to serve (tests pass their own); default: the package's `console/` folder. */
  assets?: ReadonlyMap<string, Asset>;
}

/**
 * Headers of every console page: scripts, styles and requests only from this server, and never inside a frame of
 * another site (a frame would let that site trick a user into clicking Unload: clickjacking).
 */
const PAGE_HEADERS = Object.freeze({
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
    "form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-cache',
});

function query(req: IncomingMessage): URLSearchParams {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
}

function intParam(req: IncomingMessage, name: string, min: number, max: number): number | undefined {
  const raw = query(req).get(name);
  if (raw === null) return undefined;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n < min || n > max) {
    throw new InvalidArgError(`query parameter '${name}' must be an integer in [${min}, ${max}], got '${raw}'`);
  }
  return n;
}

/**
 * The web console under `/console`: its static files and three read-only endpoints under `/console/api/`
 * (server facts, a model's config as config.pbtxt text, recent log lines, latency percentiles). Everything it
 * changes, it changes through the server's /v2 endpoints from the browser.
 */
export function consoleRoutes(opts: ConsoleOptions): Route[] {
  const assets = opts.assets ?? loadAssets();
  const guard = (ctx: RouteContext, category: ConsoleCategory): boolean => {
    const refused = opts.access?.(ctx.req, category);
    if (refused === undefined) return true;
    void sendJson(ctx.req, ctx.res, 403, { error: refused });
    return false;
  };

  const redirect: Handler = async ({ req, res }) => {
    res.setHeader('Location', '/console/');
    await send(req, res, 301, undefined, []);
  };
  const file: Handler = async ({ req, res }) => {
    const path = (req.url ?? '/').split('?')[0];
    const name = path === '/console/' ? 'index.html' : path.slice('/console/'.length);
    const asset = assets.get(name);
    if (asset === undefined) return sendJson(req, res, 404, { error: 'Not Found' });
    await send(req, res, 200, asset.type, [asset.body], PAGE_HEADERS, { compressible: true });
  };
  const server: Handler = async ({ req, res }) =>
    sendJson(req, res, 200, {
      version: NEREID_VERSION,
      model_control_mode: opts.modelControlMode,
      logs_kept: opts.logs?.capacity ?? 0,
    });
  const configText: Handler = async (ctx) => {
    if (!guard(ctx, 'model-config')) return;
    const { req, res, api, model } = ctx;
    const version = query(req).get('version') ?? undefined;
    if (version !== undefined && !/^[0-9]+$/.test(version)) {
      throw new InvalidArgError(`query parameter 'version' must be a version number, got '${version}'`);
    }
    const text = printModelConfig(api.modelConfig(model, version));
    await send(req, res, 200, 'text/plain; charset=utf-8', [Buffer.from(text, 'utf8')]);
  };
  const logs: Handler = async (ctx) => {
    if (!guard(ctx, 'logging')) return;
    const { req, res } = ctx;
    if (opts.logs === undefined) throw new NotFoundError('this server keeps no log lines for the console');
    const after = intParam(req, 'after', 0, Number.MAX_SAFE_INTEGER);
    await send(req, res, 200, 'application/json', [Buffer.from(opts.logs.json(after), 'utf8')]);
  };
  const tune: Handler = async (ctx) => {
    if (!guard(ctx, 'model-config')) return;
    const text = await readTuneReport(opts.repositories ?? [], ctx.model);
    await send(ctx.req, ctx.res, 200, 'application/json', [Buffer.from(text, 'utf8')]);
  };
  const latency: Handler = async (ctx) => {
    if (!guard(ctx, 'statistics')) return;
    const windowMs = intParam(ctx.req, 'window_ms', 100, 60_000) ?? 2000;
    await sendJson(ctx.req, ctx.res, 200, { window_ms: windowMs, models: opts.latency.summary(windowMs) });
  };

  return [
    { pattern: /^\/console$/, category: 'metadata', methods: { GET: redirect } },
    { pattern: /^\/console\/api\/server$/, category: 'metadata', methods: { GET: server } },
    {
      pattern: /^\/console\/api\/models\/(?<model>[^/]+)\/config\.pbtxt$/,
      category: 'model-config',
      methods: { GET: configText },
    },
    { pattern: /^\/console\/api\/models\/(?<model>[^/]+)\/tune$/, category: 'model-config', methods: { GET: tune } },
    { pattern: /^\/console\/api\/logs$/, category: 'logging', methods: { GET: logs } },
    { pattern: /^\/console\/api\/latency$/, category: 'statistics', methods: { GET: latency } },
    {
      pattern: /^\/console\/api\//,
      category: 'metadata',
      methods: { GET: async ({ req, res }) => sendJson(req, res, 404, { error: 'Not Found' }) },
    },
    { pattern: /^\/console\/(?:[A-Za-z0-9_-]+\.[a-z]+)?$/, category: 'metadata', methods: { GET: file } },
  ];
}
