import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { packageRoot } from '../../config/schema.js';

/**
 * Loads our own proto/grpc_service.proto and proto/health.proto once, at run time, so the service is
 * defined by the .proto files and nothing is generated or hand-copied.
 *
 * Loader options, and why:
 * - `keepCase`: field names stay snake_case as on the wire and in the server's ModelConfig objects.
 * - `longs: String`: int64/uint64 arrive as decimal strings, exact (a JS number would round past 2^53);
 *   the codec turns them into numbers or bigints where it knows the range.
 * - `enums: String`, `defaults: true`, `oneofs: true`: enums by name; absent scalars read as their proto
 *   defaults; a oneof names its chosen member (`parameter_choice`), which the parameter codec relies on.
 * - bytes stay Buffers (the loader's default), views of the received message: no copy of tensor data.
 */
const LOADER_OPTIONS: protoLoader.Options = Object.freeze({
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

/** Client constructors of the two services; `.service` of each is its server-side definition. */
export interface NereidServices {
  Inference: grpc.ServiceClientConstructor;
  Health: grpc.ServiceClientConstructor;
}

let cached: NereidServices | undefined;

/** Path of the folder holding our .proto files (works from src under tsx and from dist). */
export function protoDir(): string {
  return join(packageRoot(), 'proto');
}

/** The loaded services, parsed once per process; servers, tests and benchmarks share them. */
export function loadServices(): NereidServices {
  if (!cached) {
    const definition = protoLoader.loadSync(['grpc_service.proto', 'health.proto'], {
      ...LOADER_OPTIONS,
      includeDirs: [protoDir()],
    });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as {
      inference: { GRPCInferenceService: grpc.ServiceClientConstructor };
      grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
    };
    cached = { Inference: pkg.inference.GRPCInferenceService, Health: pkg.grpc.health.v1.Health };
  }
  return cached;
}
