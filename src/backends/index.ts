import type { Backend } from './backend.js';
import { identityBackend } from './identity/index.js';
import { onnxruntimeBackend } from './onnxruntime/index.js';

/** The backends a server offers, by name. New backends register here. */
export function defaultBackends(): Backend[] {
  return [onnxruntimeBackend(), identityBackend()];
}
