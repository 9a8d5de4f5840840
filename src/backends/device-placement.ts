import { takes, type DeviceMemory } from '../core/device.js';
import { viewFixed, type Tensor } from '../core/tensor.js';
import type { EngineRequest } from './contract.js';

/**
 * Where a batch's device tensors go, decided per instance just before `execute` (the host side's one place for it):
 * an instance that takes the tensor's device gets it as it is (zero copy); any other instance — a CPU instance,
 * another GPU, an engine that takes no device memory (identity, python, tensorrt, worker and process transports) —
 * gets a host copy of each device input and no device output buffers, so its outputs come back as host data and
 * the server copies them into the client's region. Requests without device tensors pass untouched (one check).
 *
 * Threading: main thread; a host copy is a synchronous cudaMemcpy (native/cudart.ts says why and what it costs).
 */
export function placeRequests(
  requests: readonly EngineRequest[],
  memory: DeviceMemory | undefined,
): readonly EngineRequest[] {
  if (!requests.some((r) => r.device !== undefined)) return requests;
  return requests.map((r) => placeRequest(r, memory));
}

function placeRequest(r: EngineRequest, memory: DeviceMemory | undefined): EngineRequest {
  const device = r.device;
  if (device === undefined) return r;
  const inputs = r.inputs.map((t): Tensor => {
    if (t.device === undefined || takes(memory, t.device)) return t;
    return { name: t.name, datatype: t.datatype, shape: t.shape, data: viewFixed(t.datatype, device.toHost(t.device)) };
  });
  const outputs = new Map([...device.outputs].filter(([, b]) => takes(memory, b)));
  const { device: _dropped, ...rest } = r;
  // A request left with nothing on the device carries no `device` at all: it may cross to a thread or process.
  if (outputs.size === 0 && !inputs.some((t) => t.device !== undefined)) return { ...rest, inputs };
  return { ...rest, inputs, device: { outputs, toHost: device.toHost } };
}
