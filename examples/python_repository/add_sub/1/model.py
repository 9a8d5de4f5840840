"""add_sub: the sum and the difference of two FP32 vectors, written against triton_python_backend_utils as a
Triton user would (it runs unchanged on Triton and on Nereid)."""

import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        # Output dtypes come from the config, so config and code cannot drift apart.
        self.out0_dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "OUTPUT0")["data_type"])
        self.out1_dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "OUTPUT1")["data_type"])
        pb_utils.Logger.log_info(f"add_sub instance {args['model_instance_name']} ready on {args['model_instance_kind']}")

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out0 = pb_utils.Tensor("OUTPUT0", (a + b).astype(self.out0_dtype))
            out1 = pb_utils.Tensor("OUTPUT1", (a - b).astype(self.out1_dtype))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out0, out1]))
        return responses

    def finalize(self):
        pb_utils.Logger.log_info("add_sub: finalized")
