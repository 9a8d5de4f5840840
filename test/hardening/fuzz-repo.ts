import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { accumulatorModel, writeModel } from '../fixtures/onnx-builder.js';

/**
 * The models the stateful fuzz (and the soak) run against, written to a temporary repository:
 * - `fanout`: a decoupled Python model that sends one response per element of IN (OUT = the element, IDX = its
 *   index, at most 64 of them, so a large input cannot turn into a million responses), an error response for a
 *   negative element, then the final flag. It never sleeps: a mutated request cannot make it hang on purpose, so a
 *   stream that does not end is the server's.
 * - `acc`: an accumulator with implicit state under the sequence batcher (START/END/READY controls; OUTPUT = the
 *   sum of the sequence's INPUTs so far), 4 slots, and a short idle timeout so sequences the fuzz abandons are
 *   reaped.
 * - `cached`: the identity backend (OUTPUT0 = INPUT0) with the response cache on: a cached answer that belongs to
 *   another request shows as an output that is not the input.
 */

const FANOUT_PY = `import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().reshape(-1)
            for i, v in enumerate(values[:64]):
                if v < 0:
                    sender.send(pb_utils.InferenceResponse(
                        error=pb_utils.TritonError("negative element", pb_utils.TritonError.INVALID_ARG)))
                    break
                sender.send(pb_utils.InferenceResponse([
                    pb_utils.Tensor("OUT", np.array([v], np.int32)),
                    pb_utils.Tensor("IDX", np.array([i], np.uint32)),
                ]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
`;

const FANOUT_CONFIG = `name: "fanout"
backend: "python"
model_transaction_policy { decoupled: true }
instance_group [{ count: 1 kind: KIND_CPU }]
input [{ name: "IN" data_type: TYPE_INT32 dims: [ -1 ] }]
output [{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "IDX" data_type: TYPE_UINT32 dims: [ 1 ] }]
`;

const controls = ['START', 'END', 'READY']
  .map((c) => `{ name: "${c}" control [{ kind: CONTROL_SEQUENCE_${c} int32_false_true: [ 0, 1 ] }] }`)
  .join(', ');

const ACC_CONFIG = `name: "acc"
backend: "onnxruntime"
max_batch_size: 4
instance_group [{ count: 1 kind: KIND_CPU }]
input [{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }]
output [{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }]
sequence_batching {
  max_sequence_idle_microseconds: 500000
  control_input [ ${controls} ]
  state [{ input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] }]
}
`;

const CACHED_CONFIG = `name: "cached"
backend: "identity"
max_batch_size: 4
instance_group [{ count: 1 kind: KIND_CPU }]
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }]
response_cache { enable: true }
`;

/** Writes the repository; the caller removes it. */
export async function writeFuzzRepo(): Promise<string> {
  const repo = await mkdtemp(join(tmpdir(), 'nereid-fuzz-'));
  const model = async (name: string, config: string): Promise<string> => {
    await mkdir(join(repo, name, '1'), { recursive: true });
    await writeFile(join(repo, name, 'config.pbtxt'), config);
    return join(repo, name, '1');
  };
  await writeFile(join(await model('fanout', FANOUT_CONFIG), 'model.py'), FANOUT_PY);
  await writeModel(join(await model('acc', ACC_CONFIG), 'model.onnx'), accumulatorModel());
  await model('cached', CACHED_CONFIG);
  return repo;
}
