import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { NereidError, NotFoundError, UnknownError } from '../core/errors.js';
import { abortError, errorFromGrpc, timeoutReason } from './errors.js';
import { decodeModelInferResponse, encodeModelInferRequest, type ModelInferResponseMsg } from './grpc-codec.js';
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

/**
 * The gRPC client (Node only: @grpc/grpc-js). It loads proto/grpc_service.proto at run time, as the server does,
 * so both sides are defined by the same file. Loader options differ from the server's in two places: `longs:
 * Number`, so shapes, statistics and configs read as plain numbers, as over HTTP (tensors are unaffected: they
 * travel as raw bytes); and `oneofs: false` (below).
 */

/** Options of {@link NereidGrpcClient}. */
export interface GrpcClientOptions {
  /** `host:port` of the gRPC endpoint, e.g. `localhost:8001`. */
  address: string;
  /** Channel credentials; insecure when omitted. */
  credentials?: grpc.ChannelCredentials;
  /** Default timeout of every call in milliseconds (a gRPC deadline); none when omitted or ≤ 0. */
  timeoutMs?: number;
  /** Metadata sent with every call (authentication, Triton's `triton-grpc-protocol-*` keys). */
  metadata?: Record<string, string>;
  /** Extra grpc-js channel options. */
  channelOptions?: grpc.ChannelOptions;
}

/** Options of {@link NereidGrpcClient.stream}. */
export interface StreamOptions extends CallOptions {
  /**
   * Send Triton's `triton_grpc_error: true`: the first failed request ends the stream with a real gRPC status (the
   * iterator throws the typed error) instead of an `error_message` response.
   */
  endOnError?: boolean;
}

/** One message of a stream: a result, or the error of one request (Triton's `error_message`). */
export type StreamResponse = { result: InferResult; error?: undefined } | { result?: undefined; error: NereidError };

type Callback = (err: grpc.ServiceError | null, res: unknown) => void;
type UnaryMethod = (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: Callback) => grpc.ClientUnaryCall;
type RawClient = grpc.Client & Record<string, UnaryMethod | ((md: grpc.Metadata, o: grpc.CallOptions) => unknown)>;

let service: grpc.ServiceClientConstructor | undefined;

/** The GRPCInferenceService constructor, loaded once per process from the package's proto/ folder. */
function inferenceService(): grpc.ServiceClientConstructor {
  if (service === undefined) {
    // src/client and dist/client are both two levels below the package root, where proto/ ships.
    const dir = fileURLToPath(new URL('../../proto/', import.meta.url));
    const definition = protoLoader.loadSync('grpc_service.proto', {
      keepCase: true,
      longs: Number,
      enums: String,
      defaults: true,
      // No virtual oneof-name fields (`scheduling_choice`, `parameter_choice`): a config read with them cannot be
      // sent back as a load override; defaults are never filled in for oneof members, so the set one is the one there.
      oneofs: false,
      includeDirs: [dir],
    });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as {
      inference: { GRPCInferenceService: grpc.ServiceClientConstructor };
    };
    service = pkg.inference.GRPCInferenceService;
  }
  return service;
}

/**
 * A client of Triton's `inference.GRPCInferenceService`, with the same methods as {@link NereidHttpClient} plus
 * {@link NereidGrpcClient.stream}. Every call takes `{ signal, timeoutMs }` (a deadline, and `call.cancel()` on
 * abort); errors reject with the NereidError subclass of their gRPC code, carrying the server's message.
 */
export class NereidGrpcClient {
  private readonly raw: RawClient;
  private readonly timeoutMs: number | undefined;
  private readonly metadata: Readonly<Record<string, string>>;

  /** Creates the channel; it connects lazily, on the first call. */
  constructor(options: GrpcClientOptions) {
    const Ctor = inferenceService();
    this.raw = new Ctor(options.address, options.credentials ?? grpc.credentials.createInsecure(), {
      // Triton's limit (INT32_MAX) instead of grpc-js's 4 MiB receive default: tensors can be large.
      'grpc.max_receive_message_length': 2 ** 31 - 1,
      'grpc.max_send_message_length': 2 ** 31 - 1,
      ...options.channelOptions,
    }) as RawClient;
    this.timeoutMs = options.timeoutMs;
    this.metadata = Object.freeze({ ...options.metadata });
  }

  /** Closes the channel; calls in flight fail with UNAVAILABLE. */
  close(): void {
    this.raw.close();
  }

  /** ServerLive. */
  async isServerLive(opts: CallOptions = {}): Promise<boolean> {
    return (await this.unary<{ live: boolean }>('ServerLive', {}, opts)).live;
  }

  /** ServerReady. */
  async isServerReady(opts: CallOptions = {}): Promise<boolean> {
    return (await this.unary<{ ready: boolean }>('ServerReady', {}, opts)).ready;
  }

  /** ServerMetadata: name, version, extensions. */
  async serverMetadata(opts: CallOptions = {}): Promise<ServerMetadata> {
    return this.unary<ServerMetadata>('ServerMetadata', {}, opts);
  }

  /** ModelReady; false for an unknown model or version, as over HTTP. */
  async isModelReady(name: string, version?: string, opts: CallOptions = {}): Promise<boolean> {
    try {
      return (await this.unary<{ ready: boolean }>('ModelReady', { name, version: version ?? '' }, opts)).ready;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /** ModelMetadata. */
  async modelMetadata(name: string, version?: string, opts: CallOptions = {}): Promise<ModelMetadata> {
    return this.unary<ModelMetadata>('ModelMetadata', { name, version: version ?? '' }, opts);
  }

  /** ModelConfig, as the proto object (field names as in Triton's JSON form; every field present). */
  async modelConfig(name: string, version?: string, opts: CallOptions = {}): Promise<ModelConfigJson> {
    const res = await this.unary<{ config: ModelConfigJson }>('ModelConfig', { name, version: version ?? '' }, opts);
    return res.config;
  }

  /** ModelStatistics of every model (no name), of one model, or of one version. */
  async modelStatistics(name?: string, version?: string, opts: CallOptions = {}): Promise<ModelStatistics[]> {
    const req = { name: name ?? '', version: version ?? '' };
    return (await this.unary<{ model_stats: ModelStatistics[] }>('ModelStatistics', req, opts)).model_stats;
  }

  /** RepositoryIndex; `ready: true` lists only the ready models. */
  async repositoryIndex(opts: { ready?: boolean } & CallOptions = {}): Promise<ModelIndexEntry[]> {
    const req = { repository_name: '', ready: opts.ready ?? false };
    return (await this.unary<{ models: ModelIndexEntry[] }>('RepositoryIndex', req, opts)).models;
  }

  /** RepositoryModelLoad, with an optional override config and files (`bytes_param`). */
  async loadModel(name: string, opts: LoadModelOptions = {}): Promise<void> {
    const parameters: Record<string, { string_param: string } | { bytes_param: Uint8Array }> = {};
    if (opts.config !== undefined) {
      parameters.config = { string_param: typeof opts.config === 'string' ? opts.config : JSON.stringify(opts.config) };
    }
    for (const [path, content] of Object.entries(opts.files ?? {}))
      parameters[`file:${path}`] = { bytes_param: content };
    await this.unary('RepositoryModelLoad', { repository_name: '', model_name: name, parameters }, opts);
  }

  /** RepositoryModelUnload (with `unloadDependents`, also the ensembles that use the model). */
  async unloadModel(name: string, opts: UnloadModelOptions = {}): Promise<void> {
    const parameters =
      opts.unloadDependents === undefined ? {} : { unload_dependents: { bool_param: opts.unloadDependents } };
    await this.unary('RepositoryModelUnload', { repository_name: '', model_name: name, parameters }, opts);
  }

  /** ModelInfer with raw contents. `binary` is ignored: gRPC tensors are always raw bytes. */
  async infer(model: string, inputs: readonly InferInputTensor[], opts: InferOptions = {}): Promise<InferResult> {
    const request = encodeModelInferRequest(model, inputs.map(toWireInput), opts);
    return decodeModelInferResponse(await this.unary<ModelInferResponseMsg>('ModelInfer', request, opts));
  }

  /**
   * Opens a ModelStreamInfer stream. Send requests with `send`, close the sending side with `end`, and read the
   * responses by iterating (in request order for non-decoupled models). A failed request yields `{ error }` and the
   * stream goes on; a failed stream (cancelled, deadline, transport) makes the iterator throw the typed error.
   */
  stream(opts: StreamOptions = {}): InferStream {
    const md = this.callMetadata();
    if (opts.endOnError) md.set('triton_grpc_error', 'true');
    const call = callSignal(opts.signal, undefined);
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const options: grpc.CallOptions = {};
    if (timeoutMs !== undefined && timeoutMs > 0) options.deadline = Date.now() + timeoutMs;
    const open = this.raw.ModelStreamInfer as (
      md: grpc.Metadata,
      o: grpc.CallOptions,
    ) => grpc.ClientDuplexStream<unknown, unknown>;
    const duplex = open.call(this.raw, md, options);
    return new InferStream(duplex, call.signal, call.dispose, timeoutMs);
  }

  private callMetadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    for (const [k, v] of Object.entries(this.metadata)) md.set(k, v);
    return md;
  }

  /** One unary call under the call's signal and deadline; errors mapped to the catalogue. */
  private unary<T>(rpc: string, request: unknown, opts: CallOptions): Promise<T> {
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const call = callSignal(opts.signal, undefined);
    if (call.signal.aborted) {
      call.dispose();
      return Promise.reject(abortError(call.signal.reason, rpc));
    }
    const options: grpc.CallOptions = {};
    if (timeoutMs !== undefined && timeoutMs > 0) options.deadline = Date.now() + timeoutMs;
    return new Promise<T>((resolve, reject) => {
      const method = this.raw[rpc] as UnaryMethod;
      const pending = method.call(this.raw, request, this.callMetadata(), options, (err, res) => {
        call.signal.removeEventListener('abort', onAbort);
        call.dispose();
        if (err === null) resolve(res as T);
        else reject(mapError(err, rpc, call.signal, timeoutMs));
      });
      const onAbort = (): void => pending.cancel();
      call.signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** A grpc-js error → the catalogue; our own cancel and deadline say so instead of grpc-js's wording. */
function mapError(err: unknown, rpc: string, signal: AbortSignal, timeoutMs: number | undefined): NereidError {
  if (signal.aborted) return abortError(signal.reason, rpc);
  const e = err as Partial<grpc.ServiceError>;
  if (typeof e.code !== 'number') return NereidError.from(err);
  if (e.code === grpc.status.DEADLINE_EXCEEDED && timeoutMs !== undefined) {
    return abortError(timeoutReason(timeoutMs), rpc);
  }
  return errorFromGrpc(e.code, e.details ?? e.message ?? 'no error message');
}

/**
 * An open ModelStreamInfer call: `send` requests, `end` when done, iterate for responses. `cancel` (or the signal
 * given to `stream`) cancels the call; the iterator then throws a CancelledError.
 */
export class InferStream implements AsyncIterable<StreamResponse> {
  /** Built by {@link NereidGrpcClient.stream}. */
  constructor(
    private readonly call: grpc.ClientDuplexStream<unknown, unknown>,
    private readonly signal: AbortSignal,
    private readonly dispose: () => void,
    private readonly timeoutMs: number | undefined,
  ) {
    if (signal.aborted) call.cancel();
    else signal.addEventListener('abort', this.onAbort, { once: true });
    // Errors surface through the iterator; this listener keeps an unread stream's error from crashing the process.
    call.on('error', () => undefined);
  }

  private readonly onAbort = (): void => this.call.cancel();

  /** Sends one request; inputs are checked before anything is written. */
  send(model: string, inputs: readonly InferInputTensor[], opts: Omit<InferOptions, keyof CallOptions> = {}): void {
    this.call.write(encodeModelInferRequest(model, inputs.map(toWireInput), opts));
  }

  /** Half-closes the stream: no more requests; responses still arrive. */
  end(): void {
    this.call.end();
  }

  /** Cancels the stream and every request still running on the server. */
  cancel(): void {
    this.call.cancel();
  }

  /** The responses, in order, until the server ends the stream. */
  async *[Symbol.asyncIterator](): AsyncIterator<StreamResponse> {
    try {
      for await (const msg of this.call) {
        const m = msg as { error_message: string; infer_response: ModelInferResponseMsg | null };
        if (m.error_message !== '' || m.infer_response === null) {
          // Triton sends only the text: the code is lost on the wire, so the class is UnknownError.
          yield { error: new UnknownError(m.error_message || 'stream response without a result') };
        } else {
          yield { result: decodeModelInferResponse(m.infer_response) };
        }
      }
    } catch (err) {
      throw mapError(err, 'ModelStreamInfer', this.signal, this.timeoutMs);
    } finally {
      this.signal.removeEventListener('abort', this.onAbort);
      this.dispose();
    }
  }
}
