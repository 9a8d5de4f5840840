import type * as grpc from '@grpc/grpc-js';
import { forwardedHeaders } from '../kserve/header-forward.js';
import type { ModelInferRequestMsg } from './messages.js';

/**
 * Triton's `--grpc-header-forward-pattern`: a call's metadata whose key matches become string parameters of each
 * inference request it carries (kserve/header-forward.ts has the rule; binary `-bin` metadata is never forwarded).
 * The request's own parameters win.
 */
export function withForwardedMetadata(
  msg: ModelInferRequestMsg,
  metadata: grpc.Metadata,
  pattern: RegExp | undefined,
): ModelInferRequestMsg {
  if (pattern === undefined) return msg;
  const text: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata.getMap())) if (typeof value === 'string') text[key] = value;
  const forwarded = Object.entries(forwardedHeaders(pattern, text));
  if (forwarded.length === 0) return msg;
  const params = Object.fromEntries(
    forwarded.map(([k, v]) => [k, { parameter_choice: 'string_param' as const, string_param: v }]),
  );
  return { ...msg, parameters: { ...params, ...msg.parameters } };
}
