import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError } from '../../core/errors.js';

/** A parameter that would name a cache folder: the cache is the operator's, never a model's or a load request's. */
export function refuseCachePaths(config: ModelConfig, where: string): void {
  for (const key of Object.keys(config.parameters ?? {})) {
    if (/cache/i.test(key)) {
      throw new InvalidArgError(
        `${where}: parameter '${key}' is refused: the TensorRT plan cache is the operator's (--backend-config=tensorrt,plan-cache-directory=DIR), never a model config's or a load request's`,
      );
    }
  }
}
