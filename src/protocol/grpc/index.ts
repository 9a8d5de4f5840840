/** Triton's gRPC protocol (GRPCInferenceService + grpc.health.v1) over @grpc/grpc-js. */
export {
  GRPC_MAX_MESSAGE_SIZE,
  startGrpcServer,
  type GrpcKeepaliveOptions,
  type GrpcServerOptions,
  type GrpcTlsOptions,
  type RunningGrpcServer,
} from './server.js';
export { loadServices, protoDir, type NereidServices } from './proto.js';
