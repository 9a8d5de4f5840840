import { NereidError, UnavailableError } from '../../core/errors.js';
import type { ModelIndexEntry } from '../../core/wire.js';
import type { ChildProcessHost } from '../runtime/process/child.js';
import type { FromChild } from '../runtime/process/protocol.js';
import { readTensorGroups } from '../runtime/process/wire.js';

/**
 * The model loading API of a Python model (`pb_utils.load_model`, `unload_model`, `is_model_ready`): each call
 * arrives as an `mctl` message and runs as the server's own repository API, so the server's model-control rules
 * hold as for a client: explicit mode only (Triton's UNAVAILABLE "explicit model load / unload is not allowed if
 * polling is enabled"), a load carrying code needs `--allow-code-in-load-requests`, and with the model-repository
 * API restricted to a header (which a model cannot present) loads and unloads are refused. The answer goes back as
 * a `bls_resp` of the same call id (loading.py).
 */

/** What of the server the loading API uses (the InferenceServer has it; structural, the server is to our right). */
export interface ModelController {
  loadModel(
    name: string,
    opts: { config?: string; files?: ReadonlyMap<string, Uint8Array>; signal?: AbortSignal },
  ): Promise<void>;
  unloadModel(name: string, opts: { unloadDependents?: boolean; signal?: AbortSignal }): Promise<void>;
  modelReady(name: string, version?: string): boolean;
  repositoryIndex(opts?: { ready?: boolean }): ModelIndexEntry[];
}

type ControlMessage = Extract<FromChild, { op: 'mctl' }>;

/** The calling model: its name and version, to refuse calls from a load that is being unloaded. */
export interface CallingModel {
  name: string;
  version: number;
}

export function isModelController(c: unknown): c is ModelController {
  const o = c as Partial<ModelController> | undefined;
  return (
    typeof o?.loadModel === 'function' && typeof o.unloadModel === 'function' && typeof o.modelReady === 'function'
  );
}

/**
 * Serves one load's `mctl` messages. `restriction`: set when the model-repository API is restricted on a protocol
 * (why a model may not load or unload).
 */
export function modelControlService(
  getController: () => ModelController | undefined,
  self: CallingModel,
  restriction?: string,
): (msg: ControlMessage, host: ChildProcessHost) => void {
  return (msg, host) => {
    const answer = (body: Record<string, unknown>): void =>
      host.send({ op: 'bls_resp', call: msg.call, fin: true, ...body } as never);
    void control(msg, host, getController(), self, restriction).then(
      (p) => answer(p === undefined ? {} : { p }),
      (e: unknown) => {
        const err = NereidError.from(e);
        answer({ e: { c: err.code, m: err.message } });
      },
    );
  };
}

async function control(
  msg: ControlMessage,
  host: ChildProcessHost,
  ctl: ModelController | undefined,
  self: CallingModel,
  restriction: string | undefined,
): Promise<Record<string, boolean> | undefined> {
  const api = String(msg.api);
  // Override files are in the child's block: read (and hand back) first, whatever the answer.
  let files: Map<string, Uint8Array> | undefined;
  if (msg.i !== undefined && msg.i.length > 0) {
    let bytes = 0;
    try {
      const r = readTensorGroups(host.peer, msg.blk, [msg.i], `${host.label} (pb_utils.load_model files)`);
      bytes = r.bytes;
      files = new Map(r.tensors[0].map((t) => [t.name, t.data as Uint8Array]));
    } finally {
      if (msg.blk) host.freeLater(msg.blk[0], msg.blk[1], bytes);
    }
  }
  if (ctl === undefined) {
    throw new UnavailableError(`pb_utils.${api}: this server did not give the python backend its model control`);
  }
  const model = String(msg.model);
  if (api === 'is_model_ready') return { ready: ctl.modelReady(model, msg.ver || undefined) };
  if (api !== 'load_model' && api !== 'unload_model') {
    throw new UnavailableError(`pb_utils.${api} is not a model loading API call`);
  }
  if (restriction !== undefined) throw new UnavailableError(`pb_utils.${api}('${model}'): ${restriction}`);
  // From initialize the caller is loading: an unload of it cancels that load, never the other way round.
  if (msg.init !== true && isUnloading(ctl, self)) {
    throw new UnavailableError(
      `pb_utils.${api}('${model}'): model '${self.name}' (version ${self.version}) is being unloaded; a model that is unloading cannot load or unload models`,
    );
  }
  if (api === 'load_model') {
    await ctl.loadModel(model, { config: msg.cfg, files });
    return undefined;
  }
  const unloading = ctl.unloadModel(model, { unloadDependents: msg.dep === true });
  // A model unloading itself would wait for its own execute to drain: answered once the unload is under way
  // (Triton's unload does not wait either); its outcome is the server's to log.
  if (model.trim() === self.name) {
    unloading.catch(() => undefined);
    return undefined;
  }
  await unloading;
  return undefined;
}

/** The caller's own version is UNLOADING, or its model was unloaded (the index lists it as such at once). */
function isUnloading(ctl: ModelController, self: CallingModel): boolean {
  const row = ctl.repositoryIndex().find((r) => r.name === self.name && r.version === String(self.version));
  return row !== undefined && (row.state === 'UNLOADING' || row.reason === 'unloaded');
}
