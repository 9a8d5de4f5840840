import type { CudaIpcSpan, DeviceBuffer } from '../../../core/device.js';
import { viewFixed, type Tensor } from '../../../core/tensor.js';
import type { EngineRequest } from '../../contract.js';
import type { CudaRegionWire, DeviceSlotWire, DeviceTensorDesc, TensorDesc, ToChild } from './protocol.js';

/**
 * Client CUDA shared memory over the process transport: a device tensor crosses the control channel as the
 * region's IPC handle plus an offset (protocol.ts: DeviceTensorDesc, CudaRegionWire), never as bytes. The child
 * opens each region's handle itself, once (python/nereid_python/cuda.py), reads inputs and writes outputs in
 * place, and closes its mapping when told (`cuda_close`) or when it exits.
 *
 * Only an instance whose `deviceMemory` names the tensor's device gets device tensors (backends/device-placement.ts);
 * a buffer without `ipc` (not from a client region) cannot be named to another process and is copied to the host
 * here instead.
 *
 * Threading: main thread only.
 */

/** Device inputs without an IPC handle become host tensors (one synchronous device-to-host copy each). */
export function hostCopiesWithoutIpc(requests: readonly EngineRequest[]): readonly EngineRequest[] {
  if (!requests.some((r) => r.inputs.some((t) => t.device !== undefined && t.device.ipc === undefined))) {
    return requests;
  }
  return requests.map((r) => {
    const device = r.device;
    if (device === undefined) return r;
    const inputs = r.inputs.map((t): Tensor => {
      if (t.device === undefined || t.device.ipc !== undefined) return t;
      return {
        name: t.name,
        datatype: t.datatype,
        shape: t.shape,
        data: viewFixed(t.datatype, device.toHost(t.device)),
      };
    });
    return { ...r, inputs };
  });
}

/** What an `exec` carries for its device tensors: the regions it names, and each request's output slots. */
export interface DeviceWire {
  cuda: CudaRegionWire[];
  slots: (Record<string, DeviceSlotWire> | undefined)[];
  /** Every region named, for the process to learn when each closes. */
  spans: CudaIpcSpan[];
}

/**
 * Rewrites the descriptors of device inputs (written as empty host tensors) into DeviceTensorDescs and lists the
 * regions and output slots of the batch; undefined when no request has device tensors (one check).
 */
export function deviceWire(
  requests: readonly EngineRequest[],
  descs: (TensorDesc | DeviceTensorDesc)[][],
): DeviceWire | undefined {
  if (!requests.some((r) => r.device !== undefined)) return undefined;
  const regions = new Map<number, CudaRegionWire>();
  const spans: CudaIpcSpan[] = [];
  const name = (b: DeviceBuffer): CudaIpcSpan | undefined => {
    const ipc = b.ipc;
    if (ipc === undefined) return undefined;
    if (!regions.has(ipc.region)) {
      regions.set(ipc.region, [ipc.region, b.device, Buffer.from(ipc.handle).toString('base64')]);
      spans.push(ipc);
    }
    return ipc;
  };
  const slots = requests.map((r, i) => {
    r.inputs.forEach((t, j) => {
      const ipc = t.device === undefined ? undefined : name(t.device);
      if (ipc === undefined || t.device === undefined) return;
      descs[i][j] = [t.name, t.datatype, [...t.shape], -1, t.device.byteSize, ipc.region, ipc.offset];
    });
    if (r.device === undefined || r.device.outputs.size === 0) return undefined;
    const out: Record<string, DeviceSlotWire> = {};
    for (const [n, b] of r.device.outputs) {
      const ipc = name(b);
      if (ipc !== undefined) out[n] = [ipc.region, ipc.offset, b.byteSize];
    }
    return Object.keys(out).length > 0 ? out : undefined;
  });
  return { cuda: [...regions.values()], slots, spans };
}

/**
 * The regions one child process was told about, each with a listener that tells the child to close its mapping
 * once the server closes the region. Owned by the process's host (child.ts); `dispose` at its exit.
 */
export class ChildCudaRegions {
  readonly #send: (msg: ToChild) => void;
  readonly #known = new Map<number, { signal: AbortSignal; onClose: () => void }>();

  constructor(send: (msg: ToChild) => void) {
    this.#send = send;
  }

  /** Notes the regions an `exec` names (before it is sent: a region closes only after its requests are done). */
  note(spans: readonly CudaIpcSpan[]): void {
    for (const s of spans) {
      if (this.#known.has(s.region) || s.closed.aborted) continue;
      const onClose = (): void => {
        this.#known.delete(s.region);
        this.#send({ op: 'cuda_close', r: [s.region] });
      };
      s.closed.addEventListener('abort', onClose, { once: true });
      this.#known.set(s.region, { signal: s.closed, onClose });
    }
  }

  /** Regions the child may still have open (tests). */
  get size(): number {
    return this.#known.size;
  }

  /** The process is gone (its mappings went with it): listeners removed, nothing sent. */
  dispose(): void {
    for (const { signal, onClose } of this.#known.values()) signal.removeEventListener('abort', onClose);
    this.#known.clear();
  }
}
