import { InvalidArgError } from '../../core/errors.js';
import type { BackendConfig, BackendSettings } from '../contract.js';
import { parseBool, parseInt32 } from './provider-options.js';
import { defaultMaxBatchSize } from './signature.js';

/**
 * What the onnxruntime backend reads besides the model file (checked by backends/settings.ts for every backend):
 * Triton's `--backend-config=onnxruntime,...` keys plus Nereid's `transport`, and the model parameters Triton's
 * onnxruntime backend reads (options-capi.ts and provider-options.ts turn them into session options).
 */
export const ONNXRUNTIME_SETTINGS: BackendSettings = Object.freeze({
  keys: ['enable-global-threadpool', 'intra_op_thread_count', 'inter_op_thread_count', 'transport'],
  check(cfg: BackendConfig): void {
    defaultMaxBatchSize(cfg['default-max-batch-size']);
    const pool = cfg['enable-global-threadpool'];
    if (pool !== undefined) parseBool('--backend-config=onnxruntime,enable-global-threadpool', pool);
    for (const key of ['intra_op_thread_count', 'inter_op_thread_count']) {
      const v = cfg[key];
      if (v !== undefined) parseInt32(`--backend-config=onnxruntime,${key}`, v, 0);
    }
    const transport = cfg.transport;
    if (transport !== undefined && transport !== 'inprocess' && transport !== 'thread') {
      throw new InvalidArgError(
        `--backend-config=onnxruntime,transport must be 'inprocess' or 'thread', got '${transport}'`,
      );
    }
  },
  parameters: [
    'execution_mode',
    'intra_op_thread_count',
    'inter_op_thread_count',
    'enable_mem_arena',
    'enable_mem_pattern',
    'memory.enable_memory_arena_shrinkage',
    'session.use_device_allocator_for_initializers',
    'cudnn_conv_algo_search',
    'gpu_mem_limit',
    'arena_extend_strategy',
    'do_copy_in_default_stream',
  ],
});
