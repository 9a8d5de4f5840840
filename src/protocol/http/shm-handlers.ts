import { InvalidArgError } from '../../core/errors.js';
import type { InferenceServerApi } from '../../server/api.js';
import { jsonBody } from './extension-handlers.js';
import { sendJson } from './respond.js';
import type { Handler, RouteContext } from './routes.js';

/**
 * Triton's system and CUDA shared-memory endpoints: `/v2/{system,cuda}sharedmemory[/region/<r>]/{status,register,
 * unregister}`. The facade owns the semantics (and refuses register/unregister while client shared memory is off);
 * these handlers read the region from the path and the register body.
 */

const PATH = /^\/v2\/(system|cuda)sharedmemory(?:\/region\/([^/]+))?\/(status|register|unregister)$/;

function parse(url: string | undefined): { kind: 'system' | 'cuda'; region: string; action: string } {
  const m = PATH.exec((url ?? '').split('?')[0]);
  if (m === null) throw new InvalidArgError('malformed shared memory path');
  let region = '';
  try {
    region = m[2] === undefined ? '' : decodeURIComponent(m[2]);
  } catch (err) {
    throw new InvalidArgError(`malformed percent-encoding in region name '${m[2]}'`, { cause: err });
  }
  return { kind: m[1] as 'system' | 'cuda', region, action: m[3] };
}

/** A JSON unsigned integer as bigint; absent → `fallback`, or a missing-field error when there is none. */
function uint(body: Record<string, unknown>, key: string, fallback?: bigint): bigint {
  const v = body[key];
  if (v === undefined) {
    if (fallback !== undefined) return fallback;
    throw new InvalidArgError(`Shared memory register request has no '${key}' field`);
  }
  if (typeof v === 'bigint' && v >= 0n) return v;
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return BigInt(v);
  throw new InvalidArgError(`Unable to parse '${key}': expected an unsigned integer`);
}

async function register(
  ctx: RouteContext,
  api: InferenceServerApi,
  kind: 'system' | 'cuda',
  region: string,
): Promise<void> {
  if (kind === 'cuda') return api.registerCudaSharedMemory(region);
  api.checkSystemSharedMemoryRegister(region);
  const body = await jsonBody(ctx.req, ctx.maxInputSize);
  const key = body.key;
  if (key === undefined) throw new InvalidArgError("Shared memory register request has no 'key' field");
  if (typeof key !== 'string') throw new InvalidArgError("Unable to parse 'key': expected a string");
  api.registerSystemSharedMemory(region, key, uint(body, 'offset', 0n), uint(body, 'byte_size'));
}

export const sharedMemory: Handler = async (ctx) => {
  const { req, res, api } = ctx;
  const { kind, region, action } = parse(req.url);
  if (action === 'status') {
    const name = region === '' ? undefined : region;
    return sendJson(
      req,
      res,
      200,
      kind === 'system' ? api.systemSharedMemoryStatus(name) : api.cudaSharedMemoryStatus(name),
    );
  }
  if (action === 'register') {
    await register(ctx, api, kind, region);
  } else if (kind === 'system') {
    api.unregisterSystemSharedMemory(region === '' ? undefined : region);
  } else {
    api.unregisterCudaSharedMemory(region === '' ? undefined : region);
  }
  return sendJson(req, res, 200, {});
};
