import { InternalError, NereidError, UnavailableError } from '../core/errors.js';
import { abortError, errorFromHttp } from './errors.js';
import { decodeInferResponse, encodeInferRequest } from './http-codec.js';
import type { InferResult } from './result.js';
import { callSignal } from './signal.js';
import { toWireInput } from './tensors.js';
import type {
  CallOptions,
  InferInputTensor,
  InferOptions,
  LoadModelOptions,
  ModelConfigJson,
  ModelIndexEntry,
  ModelMetadata,
  ModelStatistics,
  ServerMetadata,
  UnloadModelOptions,
} from './types.js';

/** Options of {@link NereidHttpClient}. */
export interface HttpClientOptions {
  /** Server base URL, e.g. `http://localhost:8000` (`localhost:8000` is read as http). */
  url: string;
  /** Headers sent with every request (authentication, tracing). */
  headers?: Record<string, string>;
  /** Default timeout of every call in milliseconds; none when omitted or ≤ 0. */
  timeoutMs?: number;
  /** The fetch to use (a polyfill, a test double); the global fetch by default. */
  fetch?: typeof fetch;
}

interface Exchange {
  method: 'GET' | 'POST';
  path: string;
  body?: Uint8Array<ArrayBuffer> | string;
  headers?: Record<string, string>;
}

/** What {@link NereidHttpClient} got back: status, headers and the full body. */
interface Reply {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

/**
 * A client of Nereid's (and Triton's) KServe v2 HTTP protocol. It uses only `fetch`, so it runs in browsers, Deno and
 * Bun as well as Node. Every method takes `{ signal, timeoutMs }`; server errors reject with the NereidError subclass
 * of their status (NotFoundError for 404, InvalidArgError for 400, UnsupportedError for 501, UnavailableError for
 * 503, InternalError for 500), carrying the server's message; an unreachable server rejects with UnavailableError.
 */
export class NereidHttpClient {
  private readonly base: string;
  private readonly headers: Readonly<Record<string, string>>;
  private readonly timeoutMs: number | undefined;
  private readonly fetchFn: typeof fetch;

  /** Creates a client; no connection is made until the first call. */
  constructor(options: HttpClientOptions) {
    const url = /^[a-z][a-z0-9+.-]*:\/\//i.test(options.url) ? options.url : `http://${options.url}`;
    this.base = url.replace(/\/+$/, '');
    this.headers = Object.freeze({ ...options.headers });
    this.timeoutMs = options.timeoutMs;
    // Bound so a browser's fetch is not called with the client as `this` ("Illegal invocation").
    this.fetchFn = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** True when the server answers `GET /v2/health/live` with 200. */
  async isServerLive(opts: CallOptions = {}): Promise<boolean> {
    return (await this.exchange({ method: 'GET', path: '/v2/health/live' }, opts, false)).status === 200;
  }

  /** True when the server answers `GET /v2/health/ready` with 200. */
  async isServerReady(opts: CallOptions = {}): Promise<boolean> {
    return (await this.exchange({ method: 'GET', path: '/v2/health/ready' }, opts, false)).status === 200;
  }

  /** Server name, version and extensions. */
  async serverMetadata(opts: CallOptions = {}): Promise<ServerMetadata> {
    return this.json<ServerMetadata>({ method: 'GET', path: '/v2' }, opts);
  }

  /** True when the model (version) is ready; false when it is not, or unknown. */
  async isModelReady(name: string, version?: string, opts: CallOptions = {}): Promise<boolean> {
    const reply = await this.exchange({ method: 'GET', path: `${modelPath(name, version)}/ready` }, opts, false);
    return reply.status === 200;
  }

  /** A model's metadata: versions, platform, inputs and outputs. */
  async modelMetadata(name: string, version?: string, opts: CallOptions = {}): Promise<ModelMetadata> {
    return this.json<ModelMetadata>({ method: 'GET', path: modelPath(name, version) }, opts);
  }

  /** A model's configuration in Triton's JSON form. */
  async modelConfig(name: string, version?: string, opts: CallOptions = {}): Promise<ModelConfigJson> {
    return this.json<ModelConfigJson>({ method: 'GET', path: `${modelPath(name, version)}/config` }, opts);
  }

  /** Statistics of every model (no name), of every version of one model, or of one version. */
  async modelStatistics(name?: string, version?: string, opts: CallOptions = {}): Promise<ModelStatistics[]> {
    const path = name === undefined || name === '' ? '/v2/models/stats' : `${modelPath(name, version)}/stats`;
    return (await this.json<{ model_stats: ModelStatistics[] }>({ method: 'GET', path }, opts)).model_stats;
  }

  /** The models of the repository with their state; `ready: true` lists only the ready ones. */
  async repositoryIndex(opts: { ready?: boolean } & CallOptions = {}): Promise<ModelIndexEntry[]> {
    const body = JSON.stringify(opts.ready === undefined ? {} : { ready: opts.ready });
    return this.json<ModelIndexEntry[]>({ method: 'POST', path: '/v2/repository/index', body }, opts);
  }

  /** Loads or reloads a model, optionally with an override config and files (the server needs explicit mode). */
  async loadModel(name: string, opts: LoadModelOptions = {}): Promise<void> {
    const parameters: Record<string, string> = {};
    if (opts.config !== undefined) {
      parameters.config = typeof opts.config === 'string' ? opts.config : JSON.stringify(opts.config);
    }
    for (const [path, content] of Object.entries(opts.files ?? {})) parameters[`file:${path}`] = base64(content);
    const body = JSON.stringify({ parameters });
    await this.json({ method: 'POST', path: `/v2/repository/models/${encodeURIComponent(name)}/load`, body }, opts);
  }

  /** Unloads a model (and, with `unloadDependents`, the ensembles that use it). */
  async unloadModel(name: string, opts: UnloadModelOptions = {}): Promise<void> {
    const parameters = opts.unloadDependents === undefined ? {} : { unload_dependents: opts.unloadDependents };
    const body = JSON.stringify({ parameters });
    await this.json({ method: 'POST', path: `/v2/repository/models/${encodeURIComponent(name)}/unload`, body }, opts);
  }

  /**
   * Runs an inference. Inputs are checked against their datatype and shape before anything is sent; tensors travel
   * as Triton binary data unless `binary: false`. Outputs come back as typed arrays (see {@link InferResult}).
   */
  async infer(model: string, inputs: readonly InferInputTensor[], opts: InferOptions = {}): Promise<InferResult> {
    const encoded = encodeInferRequest(inputs.map(toWireInput), {
      outputs: opts.outputs,
      id: opts.id,
      parameters: opts.parameters,
      binary: opts.binary ?? true,
    });
    const path = `${modelPath(model, opts.version)}/infer`;
    const reply = await this.exchange({ method: 'POST', path, body: encoded.body, headers: encoded.headers }, opts);
    const headerLength = reply.headers.get('Inference-Header-Content-Length');
    return decodeInferResponse(reply.body, headerLength === null ? undefined : Number(headerLength));
  }

  /** One exchange whose 2xx body is JSON. */
  private async json<T>(ex: Exchange, opts: CallOptions): Promise<T> {
    if (ex.body !== undefined) ex.headers = { 'Content-Type': 'application/json', ...ex.headers };
    const reply = await this.exchange(ex, opts);
    const text = new TextDecoder().decode(reply.body);
    try {
      return (text === '' ? {} : JSON.parse(text)) as T;
    } catch (err) {
      throw new InternalError(`${ex.method} ${ex.path}: the server's answer is not JSON`, { cause: err });
    }
  }

  /**
   * One HTTP exchange under the call's signal. With `throwOnError` (the default) a non-2xx status rejects with the
   * error it maps to; health checks pass false because their "no" is a status, not an error.
   */
  private async exchange(ex: Exchange, opts: CallOptions, throwOnError = true): Promise<Reply> {
    const what = `${ex.method} ${ex.path}`;
    const call = callSignal(opts.signal, opts.timeoutMs ?? this.timeoutMs);
    try {
      if (call.signal.aborted) throw abortError(call.signal.reason, what);
      const res = await this.fetchFn(this.base + ex.path, {
        method: ex.method,
        headers: { ...this.headers, ...ex.headers },
        body: ex.body,
        signal: call.signal,
      });
      // The body is read under the same signal: an abort or timeout while it streams ends the call too.
      const body = new Uint8Array(await res.arrayBuffer());
      if (throwOnError && (res.status < 200 || res.status > 299)) throw errorFromHttp(res.status, errorMessage(body));
      return { status: res.status, headers: res.headers, body };
    } catch (err) {
      if (err instanceof NereidError) throw err;
      if (call.signal.aborted) throw abortError(call.signal.reason, what);
      // fetch rejects with a TypeError for DNS failures, refused connections and resets.
      const detail = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : '';
      throw new UnavailableError(`${what}: cannot reach ${this.base}: ${detail}`, { cause: err });
    } finally {
      call.dispose();
    }
  }
}

/** `/v2/models/{m}[/versions/{v}]`, the name percent-encoded. */
function modelPath(name: string, version: string | undefined): string {
  const m = `/v2/models/${encodeURIComponent(name)}`;
  return version === undefined || version === '' ? m : `${m}/versions/${encodeURIComponent(version)}`;
}

/** The message of a `{"error": "..."}` body, or the body text when it is not one. */
function errorMessage(body: Uint8Array): string {
  const text = new TextDecoder().decode(body);
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
  } catch {
    // Not JSON (a proxy's HTML page, say): the text itself is the best message there is.
  }
  return text || 'no error message';
}

/** Base64 without Buffer (browser-safe), in chunks so String.fromCharCode never gets too many arguments. */
function base64(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(bin);
}
