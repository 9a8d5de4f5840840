import type { IncomingMessage } from 'node:http';
import { InvalidArgError, UnsupportedError } from '../../core/errors.js';
import { checkJsonDepth } from '../kserve/json-depth.js';
import { readBody } from './body.js';
import { decompress, requestCoding } from './compression.js';
import { connectionSignal } from './connection-signal.js';
import { sendJson } from './respond.js';
import type { RouteContext } from './routes.js';

/**
 * Handlers of Triton's HTTP extensions beyond inference: statistics, model repository, logging, trace.
 * They parse the small JSON bodies and call the server facade, which owns the semantics (and answers
 * UNSUPPORTED for what is not built yet).
 */

/** Reads a small JSON object body; an empty body is `{}`. */
export async function jsonBody(req: IncomingMessage, limit: number): Promise<Record<string, unknown>> {
  let body = await readBody(req, limit);
  const coding = requestCoding(req.headers['content-encoding']);
  if (coding !== undefined) body = await decompress(body, coding, limit);
  if (body.byteLength === 0) return {};
  checkJsonDepth(body);
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
  } catch (err) {
    throw new InvalidArgError(`failed to parse the request JSON buffer: ${(err as Error).message}`, { cause: err });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidArgError('the request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

function objectField(obj: Record<string, unknown>, key: string): Record<string, unknown> {
  const v = obj[key];
  if (v === undefined) return {};
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    throw new InvalidArgError(`'${key}' must be a JSON object`);
  }
  return v as Record<string, unknown>;
}

function optionalBool(obj: Record<string, unknown>, key: string): boolean | undefined {
  const v = obj[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw new InvalidArgError(`Invalid value for '${key}': expected a boolean`);
  return v;
}

export const modelStats = async ({ req, res, api, model, version }: RouteContext): Promise<void> =>
  sendJson(req, res, 200, { model_stats: api.modelStatistics(model || undefined, version) });

export const repositoryIndex = async ({ req, res, api, maxInputSize }: RouteContext): Promise<void> => {
  const body = await jsonBody(req, maxInputSize);
  await sendJson(req, res, 200, api.repositoryIndex({ ready: optionalBool(body, 'ready') }));
};

/** `/v2/repository[/<repo>]/models/<m>/(load|unload)`; a repository name is not supported (as Triton). */
export const repositoryControl = async (ctx: RouteContext): Promise<void> => {
  const { req, res, api, maxInputSize } = ctx;
  const m = /^\/v2\/repository(?:\/(?<repo>[^/]+))?\/models\/(?<model>[^/]+)\/(?<action>load|unload)$/.exec(
    (req.url ?? '').split('?')[0],
  );
  if (!m?.groups) throw new InvalidArgError('malformed repository path');
  if (m.groups.repo !== undefined) throw new UnsupportedError("'repository_name' specification is not supported");
  let model: string;
  try {
    model = decodeURIComponent(m.groups.model);
  } catch (err) {
    throw new InvalidArgError(`malformed percent-encoding in model name '${m.groups.model}'`, { cause: err });
  }
  const params = objectField(await jsonBody(req, maxInputSize), 'parameters');
  if (m.groups.action === 'unload') {
    await api.unloadModel(model, {
      unloadDependents: optionalBool(params, 'unload_dependents'),
      signal: connectionSignal(req.socket),
    });
  } else {
    const files = new Map<string, Uint8Array>();
    let config: string | undefined;
    for (const [key, value] of Object.entries(params)) {
      if (key === 'config') {
        if (typeof value !== 'string') throw new InvalidArgError("'config' must be a string holding the JSON config");
        checkJsonDepth(value, undefined, `failed to load '${model}', config`);
        config = value;
      } else if (key.startsWith('file:')) {
        if (typeof value !== 'string') throw new InvalidArgError(`'${key}' must be a base64 string`);
        files.set(key.slice('file:'.length), Buffer.from(value, 'base64'));
      }
    }
    await api.loadModel(model, { config, files, signal: connectionSignal(req.socket) });
  }
  await sendJson(req, res, 200, {});
};

export const logging = async ({ req, res, api, maxInputSize }: RouteContext): Promise<void> => {
  if (req.method === 'GET') return sendJson(req, res, 200, api.logSettings());
  return sendJson(req, res, 200, api.updateLogSettings(await jsonBody(req, maxInputSize)));
};

export const trace = async ({ req, res, api, model, maxInputSize }: RouteContext): Promise<void> => {
  if (req.method === 'GET') return sendJson(req, res, 200, api.traceSettings(model || undefined));
  return sendJson(req, res, 200, api.updateTraceSettings(model || undefined, await jsonBody(req, maxInputSize)));
};
