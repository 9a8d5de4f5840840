import { InvalidArgError } from '../core/errors.js';
import { GLOBAL_BACKEND } from '../backends/settings.js';

/**
 * `--backend-config` values → settings per backend name (GLOBAL_BACKEND for settings without one). Three forms:
 * - Triton's, one setting per flag: `onnxruntime,default-max-batch-size=8`;
 * - several settings in one flag, as seed 000 and the README write it:
 *   `tensorrt,coalesce-request-input=true,plugins="/a.so;/b.so",version-compatible=true` (a comma starts a new
 *   setting only where `<key>=` follows it, so a value keeps its other commas);
 * - Triton's global form with no backend name: `default-max-batch-size=8` (every backend gets it).
 * Quotes around a value are dropped: a shell keeps them when the whole flag is quoted (or a manifest passes argv
 * as written), and the seed's own line closes its quote after the next setting. A later setting wins.
 * Backend names and keys are checked against the backends at start-up (backends/settings.ts).
 */
export function parseBackendConfig(entries: readonly string[]): Map<string, Record<string, string>> {
  const out = new Map<string, Record<string, string>>();
  for (const e of entries) {
    const comma = e.indexOf(',');
    const eq = e.indexOf('=');
    const global = eq >= 0 && (comma < 0 || eq < comma);
    const backend = global ? GLOBAL_BACKEND : e.slice(0, comma);
    const list = global ? e : e.slice(comma + 1);
    if (eq < 0 || (!global && backend.trim() === '')) {
      throw new InvalidArgError(
        `--backend-config '${e}' must look like <backend>,<key>=<value>[,<key>=<value>...] (e.g. onnxruntime,default-max-batch-size=8)`,
      );
    }
    const settings = out.get(backend) ?? {};
    for (const part of list.split(/,(?=\s*"?[A-Za-z0-9_.-]+=)/)) {
      const at = part.indexOf('=');
      const key = part.slice(0, at).trim().replace(/^"/, '');
      if (at <= 0 || key === '') {
        throw new InvalidArgError(`--backend-config '${e}': '${part}' is not <key>=<value>`);
      }
      settings[key] = unquote(part.slice(at + 1));
    }
    out.set(backend, settings);
  }
  return out;
}

/** A value without the quotes that a shell would have removed (each end on its own: see above). */
function unquote(v: string): string {
  return v.replace(/^"/, '').replace(/"$/, '');
}

/**
 * `--tensorrt-plan-cache=DIR` into the tensorrt backend's settings as `plan-cache-directory` (a flag of its own so that
 * a path with commas needs no quoting); given both ways with different folders, it is a usage error.
 */
export function withTensorRTPlanCache(
  config: Map<string, Record<string, string>>,
  dir: string | undefined,
): Map<string, Record<string, string>> {
  if (dir === undefined) return config;
  const trt = config.get('tensorrt') ?? {};
  const given = trt['plan-cache-directory'];
  if (given !== undefined && given !== dir) {
    throw new InvalidArgError(
      `--tensorrt-plan-cache=${dir} and --backend-config=tensorrt,plan-cache-directory=${given} name different folders; give one`,
    );
  }
  config.set('tensorrt', { ...trt, 'plan-cache-directory': dir });
  return config;
}
