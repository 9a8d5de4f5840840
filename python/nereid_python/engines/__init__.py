"""Engines built into Nereid that the stub hosts the way it hosts a user's ``model.py``.

An engine folder has a ``model.py`` with ``TritonPythonModel`` (loaded by the stub from its file path, one module
object per instance) and ordinary modules it imports by absolute name (``nereid_python.engines.<engine>.*``): those
are imported once per process, so they hold what the instances of one process share (a TensorRT runtime and engine).
"""
