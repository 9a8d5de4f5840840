import type { IncomingMessage, ServerResponse } from 'node:http';
import { InvalidArgError, UnsupportedError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { InferenceServerApi } from '../../server/api.js';
import { refusedBy, restrictedMessage, type ApiCategory, type Restrictions } from '../restricted.js';
import { sendJson } from './respond.js';
import type { StreamLimits } from '../kserve/stream-budget.js';

/** What a route handler gets: the exchange, the server facade, and the path's model/version captures. */
export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  api: InferenceServerApi;
  logger: Logger;
  maxInputSize: number;
  /** `--max-response-bytes`: largest inference response body. */
  maxResponseBytes: number;
  /** `--http-restricted-api`: categories that demand a header. */
  restrictions: Restrictions;
  /** generate_stream's limits (kserve/stream-budget.ts). */
  stream: StreamLimits;
  /** `--http-header-forward-pattern`, compiled: matching headers become request parameters. */
  headerForward?: RegExp;
  /** Decoded `{m}` capture, when the route has one. */
  model: string;
  /** `{v}` capture ([0-9]+), undefined when the path has no version segment. */
  version: string | undefined;
}

export type Handler = (ctx: RouteContext) => Promise<void>;
export type Method = 'GET' | 'POST';

/**
 * One row of the routing table: a path regex (named groups `model`, `version`), the API category it belongs to (for
 * `--http-restricted-api`; required, so no route can be added without one) and a handler per method.
 */
export interface Route {
  readonly pattern: RegExp;
  readonly category: ApiCategory;
  readonly methods: Readonly<Partial<Record<Method, Handler>>>;
}

/** A handler for an endpoint whose feature is not built yet: an honest 501, never a fake success. */
export function notImplemented(feature: string): Handler {
  return () => Promise.reject(new UnsupportedError(`${feature} is not implemented yet in Nereid`));
}

const M = '(?<model>[^/]+)';
const V = '(?:/versions/(?<version>[0-9]+))?';

/** Path patterns of Triton's fixed routing table (http_server.cc `Handle()`), in Triton's matching order. */
export const PATHS = Object.freeze({
  server: /^\/v2\/?$/,
  live: /^\/v2\/health\/live$/,
  ready: /^\/v2\/health\/ready$/,
  statsAll: /^\/v2\/models\/stats$/,
  modelReady: new RegExp(`^/v2/models/${M}${V}/ready$`),
  modelConfig: new RegExp(`^/v2/models/${M}${V}/config$`),
  modelInfer: new RegExp(`^/v2/models/${M}${V}/infer$`),
  modelStats: new RegExp(`^/v2/models/${M}${V}/stats$`),
  modelGenerate: new RegExp(`^/v2/models/${M}${V}/generate(?:_stream)?$`),
  modelTrace: new RegExp(`^/v2/models/${M}/trace/setting$`),
  modelMetadata: new RegExp(`^/v2/models/${M}${V}$`),
  repositoryIndex: /^\/v2\/repository(?:\/[^/]+)?\/index$/,
  repositoryControl: /^\/v2\/repository(?:\/[^/]+)?\/models\/[^/]+\/(?:load|unload)$/,
  trace: /^\/v2\/trace\/setting$/,
  logging: /^\/v2\/logging$/,
  shmStatus: /^\/v2\/(?:system|cuda)sharedmemory(?:\/region\/[^/]+)?\/status$/,
  shmRegister: /^\/v2\/(?:system|cuda)sharedmemory\/region\/[^/]+\/register$/,
  shmUnregister: /^\/v2\/(?:system|cuda)sharedmemory(?:\/region\/[^/]+)?\/unregister$/,
});

/** Handlers of the implemented endpoints (handlers.ts). */
export interface CoreHandlers {
  server: Handler;
  live: Handler;
  ready: Handler;
  modelReady: Handler;
  modelMetadata: Handler;
  modelConfig: Handler;
  modelInfer: Handler;
  modelStats: Handler;
  /** generate and generate_stream (generate.ts). */
  generate: Handler;
  repositoryIndex: Handler;
  repositoryControl: Handler;
  logging: Handler;
  trace: Handler;
  sharedMemory: Handler;
}

/**
 * The routing table. A feature that gets built replaces its `notImplemented` entry with a real handler; everything
 * else (404, 405, captures, error mapping) stays in `dispatch`.
 */
export function buildRoutes(h: CoreHandlers): readonly Route[] {
  const { modelStats: stats, trace, sharedMemory: shm } = h;
  return Object.freeze([
    { pattern: PATHS.server, category: 'metadata', methods: { GET: h.server } },
    { pattern: PATHS.live, category: 'health', methods: { GET: h.live } },
    { pattern: PATHS.ready, category: 'health', methods: { GET: h.ready } },
    { pattern: PATHS.statsAll, category: 'statistics', methods: { GET: stats } },
    { pattern: PATHS.modelReady, category: 'health', methods: { GET: h.modelReady } },
    { pattern: PATHS.modelConfig, category: 'model-config', methods: { GET: h.modelConfig } },
    { pattern: PATHS.modelInfer, category: 'inference', methods: { POST: h.modelInfer } },
    { pattern: PATHS.modelStats, category: 'statistics', methods: { GET: stats } },
    {
      pattern: PATHS.modelGenerate,
      category: 'inference',
      methods: { POST: h.generate },
    },
    { pattern: PATHS.modelTrace, category: 'trace', methods: { GET: trace, POST: trace } },
    { pattern: PATHS.modelMetadata, category: 'metadata', methods: { GET: h.modelMetadata } },
    { pattern: PATHS.repositoryIndex, category: 'model-repository', methods: { POST: h.repositoryIndex } },
    { pattern: PATHS.repositoryControl, category: 'model-repository', methods: { POST: h.repositoryControl } },
    { pattern: PATHS.trace, category: 'trace', methods: { GET: trace, POST: trace } },
    { pattern: PATHS.logging, category: 'logging', methods: { GET: h.logging, POST: h.logging } },
    { pattern: PATHS.shmStatus, category: 'shared-memory', methods: { GET: shm } },
    { pattern: PATHS.shmRegister, category: 'shared-memory', methods: { POST: shm } },
    { pattern: PATHS.shmUnregister, category: 'shared-memory', methods: { POST: shm } },
  ]);
}

function decodeSegment(s: string | undefined): string {
  if (s === undefined) return '';
  try {
    return decodeURIComponent(s);
  } catch (err) {
    throw new InvalidArgError(`malformed percent-encoding in model name '${s}'`, { cause: err });
  }
}

/**
 * Routes one request: unknown path → 404 `{"error":"Not Found"}`; a restricted category without its header → 403
 * (checked before the method, as Triton does); known path with another method → 405 (with `Allow`); otherwise the
 * handler. Handler errors propagate to the caller, which maps them (respond.ts sendError).
 */
export async function dispatch(routes: readonly Route[], base: Omit<RouteContext, 'model' | 'version'>): Promise<void> {
  const { req, res } = base;
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  for (const route of routes) {
    const m = route.pattern.exec(path);
    if (m === null) continue;
    const refused = refusedBy(base.restrictions, route.category, (k) => req.headers[k]);
    if (refused !== undefined) return sendJson(req, res, 403, { error: restrictedMessage(refused, 'API') });
    const handler = route.methods[req.method as Method];
    if (handler === undefined) {
      res.setHeader('Allow', Object.keys(route.methods).join(', '));
      return sendJson(req, res, 405, { error: 'Method Not Allowed' });
    }
    const model = decodeSegment(m.groups?.model);
    return handler({ ...base, model, version: m.groups?.version });
  }
  return sendJson(req, res, 404, { error: 'Not Found' });
}
