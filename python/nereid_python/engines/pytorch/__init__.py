"""Nereid's PyTorch engine: TorchScript models (``model.pt``) run with ``torch.jit.load`` on the CPU or one CUDA
device, one process per model version and device hosting every instance there (see ``model.py``).

Modules: ``naming`` (which forward() argument each config input feeds and which returned value each config output
is, by Triton's rules; no torch needed), ``runtime`` (importing torch, the process-wide settings, loading and
sharing modules), ``instance`` (one instance: batches in, responses out), ``model`` (what the stub runs).
"""
