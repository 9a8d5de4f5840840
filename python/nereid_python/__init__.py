"""Nereid's Python stub: the child process that runs a Triton-style ``model.py`` for Nereid's ``python`` backend.

The host (Node, ``src/backends/runtime/process/``) starts ``python -m nereid_python`` with a control socket on an
inherited file descriptor and tensors in ``/dev/shm`` segments; ``triton_python_backend_utils`` (this folder's
sibling module) is the API a ``model.py`` imports.
"""
