import { Metadata, status, type ServerDuplexStream, type ServerUnaryCall, type UntypedHandleCall } from '@grpc/grpc-js';
import { refusedBy, restrictedMessage, type ApiCategory, type Restrictions } from '../restricted.js';

/**
 * `--grpc-restricted-protocol` for every rpc: each rpc's category (Triton's grpc_server.cc assignment), and a wrapper
 * that refuses a call without the `triton-grpc-protocol-<key>` header before its handler runs, with UNAVAILABLE
 * "This protocol is restricted, expecting header '...'" (a stream is ended with that status as it opens).
 */
export const RPC_CATEGORIES: Readonly<Record<string, ApiCategory>> = Object.freeze({
  ServerLive: 'health',
  ServerReady: 'health',
  ModelReady: 'health',
  Check: 'health',
  ServerMetadata: 'metadata',
  ModelMetadata: 'metadata',
  ModelInfer: 'inference',
  ModelStreamInfer: 'inference',
  ModelConfig: 'model-config',
  ModelStatistics: 'statistics',
  RepositoryIndex: 'model-repository',
  RepositoryModelLoad: 'model-repository',
  RepositoryModelUnload: 'model-repository',
  SystemSharedMemoryStatus: 'shared-memory',
  SystemSharedMemoryRegister: 'shared-memory',
  SystemSharedMemoryUnregister: 'shared-memory',
  CudaSharedMemoryStatus: 'shared-memory',
  CudaSharedMemoryRegister: 'shared-memory',
  CudaSharedMemoryUnregister: 'shared-memory',
  TraceSetting: 'trace',
  LogSettings: 'logging',
});

type AnyCall = ServerUnaryCall<unknown, unknown> | ServerDuplexStream<unknown, unknown>;

/**
 * Wraps a service implementation so each rpc checks its category first. An rpc missing from RPC_CATEGORIES is a
 * start-up error: a new rpc cannot be served unchecked.
 */
export function restrictService(
  handlers: Record<string, UntypedHandleCall>,
  restrictions: Restrictions,
): Record<string, UntypedHandleCall> {
  const out: Record<string, UntypedHandleCall> = {};
  for (const [rpc, handler] of Object.entries(handlers)) {
    const category = RPC_CATEGORIES[rpc];
    if (category === undefined) throw new Error(`gRPC rpc '${rpc}' has no API category for restricted protocols`);
    if (!restrictions.has(category)) {
      out[rpc] = handler;
      continue;
    }
    out[rpc] = ((call: AnyCall, callback?: (err: unknown) => void) => {
      const refused = refusedBy(restrictions, category, (k) =>
        call.metadata.get(k).map((v) => (typeof v === 'string' ? v : v.toString('utf8'))),
      );
      if (refused === undefined) {
        return (handler as (c: AnyCall, cb?: unknown) => void)(call, callback);
      }
      const err = {
        code: status.UNAVAILABLE,
        details: restrictedMessage(refused, 'protocol'),
        metadata: new Metadata(),
      };
      if (callback !== undefined) callback(err);
      else (call as ServerDuplexStream<unknown, unknown>).emit('error', err);
    }) as UntypedHandleCall;
  }
  return out;
}
