"""``pb_utils.Tensor`` and how tensors are placed in (and read from) shared memory.

A tensor descriptor on the wire is ``[name, datatype, shape, offset in block, byte size]``; a message names the
block (``[segment, offset, size]``) that holds all of its tensors.
"""

from __future__ import annotations

import numpy as np

from . import datatypes
from .runtime import STATE
from .shm import ALIGN, decode_bytes_elements, encode_bytes_elements


class Tensor:
    """A named tensor backed by a numpy array (Triton's ``pb_utils.Tensor``)."""

    __slots__ = ("_name", "_array", "_datatype")

    def __init__(self, name: str, tensor, dtype=None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"Tensor name must be a str, got {type(name).__name__}")
        array = tensor if isinstance(tensor, np.ndarray) else np.asarray(tensor, dtype=dtype)
        try:
            datatype = datatypes.from_numpy(array.dtype)
        except TypeError:
            from .api import TritonModelException

            raise TritonModelException(f"Tensor '{name}': numpy dtype {array.dtype} has no Triton datatype") from None
        self._name = name
        self._array = array
        self._datatype = datatype

    @classmethod
    def _wrap(cls, name: str, array: np.ndarray, datatype: str) -> "Tensor":
        t = cls.__new__(cls)
        t._name = name
        t._array = array
        t._datatype = datatype
        return t

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def triton_dtype(self) -> str:
        return self._datatype

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def is_cpu(self) -> bool:
        return True

    def to_dlpack(self):
        """A DLPack capsule viewing this tensor's memory (no copy); BYTES tensors have no DLPack form."""
        if self._datatype == "BYTES":
            from .api import TritonModelException

            raise TritonModelException(f"Tensor '{self._name}': BYTES tensors cannot be exported to DLPack")
        return np.ascontiguousarray(self._array).__dlpack__()

    def __dlpack__(self, *args, **kwargs):
        return np.ascontiguousarray(self._array).__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0

    @staticmethod
    def from_dlpack(name: str, dlpack) -> "Tensor":
        """A tensor from a DLPack capsule or any object with ``__dlpack__`` (a CPU torch tensor, say), no copy."""
        from .api import TritonModelException

        source = dlpack if hasattr(dlpack, "__dlpack__") else _Capsule(dlpack)
        device = source.__dlpack_device__() if hasattr(source, "__dlpack_device__") else (1, 0)
        if device[0] not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise TritonModelException(
                f"Tensor '{name}': DLPack tensor is on device type {device[0]}; Nereid's python backend takes CPU "
                "tensors only (move it to the CPU first, e.g. .cpu())"
            )
        try:
            array = np.from_dlpack(source)
        except (BufferError, TypeError, RuntimeError) as e:
            raise TritonModelException(f"Tensor '{name}': cannot read DLPack tensor: {e}") from None
        if not array.flags.c_contiguous:
            raise TritonModelException(f"Tensor '{name}': DLPack tensor must be C-contiguous")
        return Tensor(name, array)

    def __repr__(self) -> str:
        return f"Tensor(name={self._name!r}, datatype={self._datatype}, shape={list(self._array.shape)})"


class _Capsule:
    """Lets numpy import a bare DLPack capsule (``np.from_dlpack`` wants an object with ``__dlpack__``)."""

    def __init__(self, capsule) -> None:
        self._capsule = capsule

    def __dlpack__(self, *args, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)


# -- shared memory <-> tensors ------------------------------------------------------------------------------------


def read_block(blk) -> np.ndarray | None:
    """The host block a message names (``[segment, offset, size]``), or None when it carries no tensor data."""
    if not blk:
        return None
    host = STATE.host
    assert host is not None
    return host.block(blk[0], blk[1], blk[2])


def read_tensors(block: np.ndarray | None, descs) -> list[Tensor]:
    """Tensors over a host block: fixed-size ones are views (no copy), BYTES ones are decoded."""
    out = []
    for name, datatype, shape, off, nbytes in descs:
        shape = tuple(shape)
        if nbytes == 0 or block is None:
            dt = datatypes.TO_NUMPY[datatype]
            array = np.empty(shape, dtype=dt) if datatype != "BYTES" else np.empty(shape, dtype=np.object_)
        elif datatype == "BYTES":
            count = 1
            for d in shape:
                count *= d
            array = decode_bytes_elements(block[off : off + nbytes], count).reshape(shape)
        else:
            array = block[off : off + nbytes].view(datatypes.TO_NUMPY[datatype]).reshape(shape)
        out.append(Tensor._wrap(name, array, datatype))
    return out


_MASK = ~(ALIGN - 1)


def write_tensors(tensors) -> tuple[list | None, list]:
    """Copies tensors into one new block of this process's segments: ``(block, descriptors)``."""
    arena = STATE.arena
    assert arena is not None
    staged = []
    total = 0
    for t in tensors:
        a = t._array
        if t._datatype == "BYTES":
            data = encode_bytes_elements(a.reshape(-1) if a.ndim else a.reshape(1))
            n = len(data)
        else:
            # The wire is little-endian; a big-endian array is swapped on the way in.
            data = a if a.dtype.byteorder != ">" else a.astype(a.dtype.newbyteorder("<"))
            n = a.nbytes
        staged.append((t, data, total, n))
        total += (n + ALIGN - 1) & _MASK
    if total == 0:
        return None, [[t._name, t._datatype, list(t._array.shape), 0, 0] for t in tensors]
    seg, off, view = arena.alloc(total)
    descs = []
    for t, data, rel, n in staged:
        if n:
            if type(data) is bytes:
                view[rel : rel + n] = np.frombuffer(data, np.uint8)
            elif data.flags.c_contiguous:
                view[rel : rel + n] = data.reshape(-1).view(np.uint8)
            else:
                # Copies any other layout (non-contiguous, negative strides) into C order.
                np.copyto(view[rel : rel + n].view(data.dtype).reshape(data.shape), data, casting="no")
        descs.append([t._name, t._datatype, list(t._array.shape), rel, n])
    return [seg, off], descs
