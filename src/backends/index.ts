import type { CustomMetrics } from '../core/custom-metrics.js';
import type { Backend } from './contract.js';
import { identityBackend } from './identity/index.js';
import { onnxruntimeBackend } from './onnxruntime/index.js';
import { pythonBackend } from './python/index.js';
import { pytorchBackend } from './pytorch/index.js';
import { tensorrtBackend } from './tensorrt/index.js';

export type * from './contract.js';
export { BackendRegistry } from './registry.js';
export { InstancePool, type PoolHealth } from './runtime/pool.js';

/** The backends a server offers, by name. New backends register here. */
export function defaultBackends(
  opts: { customMetrics?: CustomMetrics; modelRepositoryRestriction?: string; pinnedMemoryPoolBytes?: number } = {},
): Backend[] {
  return [
    onnxruntimeBackend({ pinnedMemoryPoolBytes: opts.pinnedMemoryPoolBytes }),
    identityBackend(),
    pythonBackend({ customMetrics: opts.customMetrics, modelRepositoryRestriction: opts.modelRepositoryRestriction }),
    tensorrtBackend(),
    pytorchBackend(),
  ];
}
