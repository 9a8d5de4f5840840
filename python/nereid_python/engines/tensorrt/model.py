"""The TensorRT instance as the stub runs it: ``TritonPythonModel`` with initialize / execute / finalize.

The stub imports this file once per instance (a fresh module each time); everything shared by the instances of
the process lives in ``nereid_python.engines.tensorrt.state`` (a normal import, so one per process). The host
(``src/backends/tensorrt/backend.ts``) passes in ``args``: ``plan``, ``device``, ``profiles``, ``max_batch_size``,
``instance_name`` and the resolved ``options`` (JSON).
"""

import json

from nereid_python.api import Logger
from nereid_python.engines.tensorrt import context, state, wire


class TritonPythonModel:
    def initialize(self, args):
        options = json.loads(args["options"])
        shared = state.shared(args["plan"], int(args["device"]), options)
        for w in shared.pinning.warnings:
            Logger.log_warn(w)
        self.instance = context.Instance(
            shared,
            args["instance_name"],
            [int(p) for p in json.loads(args["profiles"])],
            int(args["max_batch_size"]),
            options,
            Logger.log_info,
        )

    def execute(self, requests):
        return self.instance.run(requests)

    def _nereid_execute_wire(self, reqs, base):
        """A batch straight from the host's message (nereid_python/fastpath.py), or None for the general path."""
        batch = wire.plan(self.instance, reqs, base)
        return None if batch is None else wire.run(self.instance, batch)

    def finalize(self):
        self.instance.close()
