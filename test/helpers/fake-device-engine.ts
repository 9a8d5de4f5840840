import type { Backend, EngineRequest, EngineResponse } from '../../src/backends/contract.js';
import { inProcessBackend } from '../../src/backends/runtime/inprocess.js';
import type { Tensor } from '../../src/core/tensor.js';
import type { FakeCudaRuntime } from './fake-cudart.js';

/** What one `execute` of the test double was given. */
export interface DeviceExecution {
  instance: string;
  requests: number;
  /** Per request: where each input was (`cuda:N` or `host`) and which outputs it was offered in device memory. */
  seen: { inputs: Record<string, string>; deviceOutputs: string[] }[];
}

/**
 * TEST DOUBLE of an engine that takes CUDA memory the way onnxruntime's KIND_GPU instances do (this machine has no
 * GPU, so the real one runs only on the device: scripts/gpu/cudashm-on-device.sh). Backend `fakegpu`, INT32
 * OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1, row by row. A KIND_GPU instance declares
 * `deviceMemory` on its GPU: it reads device inputs and writes offered device outputs through the fake runtime's
 * `deviceView` (what a kernel would do), answering those outputs with `device` set. A KIND_CPU instance declares
 * nothing and so must only ever see host data. Every execute is recorded in `log`.
 */
export function fakeDeviceBackend(rt: FakeCudaRuntime, log: DeviceExecution[]): Backend {
  return inProcessBackend(
    {
      name: 'fakegpu',
      platforms: [],
      defaultModelFilename: '',
      datatypes: ['INT32'],
      sections: ['response_cache'],
      kinds: ['KIND_GPU', 'KIND_CPU'],
      autoComplete: (config) => Promise.resolve(config),
    },
    {
      load: () =>
        Promise.resolve({
          createInstance: (spec) =>
            Promise.resolve({
              deviceMemory: spec.kind === 'KIND_GPU' ? { kind: 'cuda' as const, device: spec.device } : undefined,
              execute: (requests, responder) => {
                log.push({ instance: spec.name, requests: requests.length, seen: requests.map(describe) });
                requests.forEach((r, i) => responder.send(i, run(rt, r), { final: true }));
                return Promise.resolve({ computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 });
              },
              destroy: () => Promise.resolve(),
            }),
          unload: () => Promise.resolve(),
        }),
    },
  );
}

function describe(r: EngineRequest): DeviceExecution['seen'][number] {
  return {
    inputs: Object.fromEntries(r.inputs.map((t) => [t.name, t.device ? `cuda:${t.device.device}` : 'host'])),
    deviceOutputs: [...(r.device?.outputs.keys() ?? [])],
  };
}

function int32(rt: FakeCudaRuntime, t: Tensor): Int32Array {
  if (t.device === undefined) return t.data as Int32Array;
  const view = rt.deviceView(t.device.address, t.device.byteSize);
  return new Int32Array(view.buffer, view.byteOffset, t.device.byteSize / 4);
}

function run(rt: FakeCudaRuntime, r: EngineRequest): EngineResponse {
  const find = (n: string): Tensor => r.inputs.find((t) => t.name === n) as Tensor;
  const a = int32(rt, find('INPUT0'));
  const b = int32(rt, find('INPUT1'));
  const shape = find('INPUT0').shape;
  const outputs = r.outputs.map((name): Tensor => {
    const values = Int32Array.from(a, (x, k) => (name === 'OUTPUT0' ? x + b[k] : x - b[k]));
    const buffer = r.device?.outputs.get(name);
    if (buffer === undefined) return { name, datatype: 'INT32', shape: [...shape], data: values };
    rt.deviceView(buffer.address, values.byteLength).set(new Uint8Array(values.buffer));
    const device = { ...buffer, byteSize: values.byteLength };
    return { name, datatype: 'INT32', shape: [...shape], data: new Int32Array(0), device };
  });
  return { outputs };
}
