"""MLServer custom runtime for the benchmark's peer: one onnxruntime session per model, inputs decoded and
outputs encoded with MLServer's own NumpyCodec (there is no mlserver-onnx package on PyPI; a custom runtime is
MLServer's documented way to serve a framework it does not ship). Session options are onnxruntime's defaults,
the same thread budget as the raw onnxruntime-node baseline."""

import numpy as np
import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse
from mlserver.utils import get_model_uri


class OnnxRuntime(MLModel):
    async def load(self) -> bool:
        self._session = ort.InferenceSession(await get_model_uri(self._settings), providers=["CPUExecutionProvider"])
        self._outputs = [o.name for o in self._session.get_outputs()]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feeds = {i.name: np.ascontiguousarray(NumpyCodec.decode_input(i)) for i in payload.inputs}
        results = self._session.run(self._outputs, feeds)
        return InferenceResponse(
            model_name=self.name,
            outputs=[NumpyCodec.encode_output(name, value) for name, value in zip(self._outputs, results)],
        )
