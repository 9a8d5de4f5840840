"""Triton python-backend model for the benchmark's Triton peer: runs the model's model.onnx with onnxruntime
(Python), default session options. The tritonserver binary shipped in the nvidia-pytriton wheel carries only the
python backend (no onnxruntime backend), so this is how Triton serves an ONNX file from that wheel."""

import os

import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o.name for o in self.session.get_outputs()]

    def execute(self, requests):
        responses = []
        for request in requests:
            feeds = {name: pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in self.inputs}
            results = self.session.run(self.outputs, feeds)
            tensors = [pb_utils.Tensor(name, value) for name, value in zip(self.outputs, results)]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses
