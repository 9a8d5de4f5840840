"""Nereid's TensorRT engine: serialized engines (``model.plan``) run through TensorRT's Python API with CUDA from
``cuda-bindings``, one process per GPU hosting every instance of a model on that GPU (see ``model.py``).

Modules: ``gpu`` (checked CUDA runtime calls), ``loader`` (importing TensorRT, plugins, runtimes, deserialization
with TensorRT's own messages), ``facts`` (what a plan declares: I/O tensors and optimization profiles), ``context``
(one execution context per profile with its buffers), ``model`` (the instance the stub runs), ``probe`` (facts for
auto-complete, in a short-lived process), ``convert`` and ``precision`` (``nereid convert``: ONNX to plan).
"""
