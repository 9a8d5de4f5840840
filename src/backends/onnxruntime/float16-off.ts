/**
 * onnxruntime-node 1.30's native binding cannot read a Float16Array (N-API has no such typed-array type: a run fails
 * with "not enough space: expected 6, got 0"), yet onnxruntime-common turns every float16 Uint16Array into one as
 * soon as the runtime has Float16Array (Node 24 does). This module runs in the engine thread before onnxruntime-node
 * is imported and hides Float16Array there, so float16 data stays in Uint16Arrays of raw bits, as Nereid carries
 * FP16 everywhere. It touches only the engine thread's global object.
 */
Reflect.deleteProperty(globalThis, 'Float16Array');
