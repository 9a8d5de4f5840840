"""The PyTorch instance as the stub runs it: ``TritonPythonModel`` with initialize / execute / finalize.

The stub imports this file once per instance (a fresh module each time); what the instances of a process share
lives in ``nereid_python.engines.pytorch.runtime`` (a normal import, one per process). The host
(``src/backends/pytorch/backend.ts``) passes in ``args``: ``model_path``, ``device`` (``cpu`` or ``cuda:N``),
``instance_name``, ``model_name``, ``io`` (the config's inputs, outputs and max_batch_size, JSON) and ``options``
(the resolved parameters, JSON).
"""

from nereid_python.api import Logger
from nereid_python.engines.pytorch import instance


class TritonPythonModel:
    def initialize(self, args):
        self.instance = instance.Instance(args, Logger.log_info, Logger.log_warn)

    def execute(self, requests):
        return self.instance.run(requests)

    def finalize(self):
        self.instance.close()
