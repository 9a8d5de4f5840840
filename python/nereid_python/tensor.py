"""``pb_utils.Tensor`` and how tensors are placed in (and read from) shared memory.

A tensor descriptor on the wire is ``[name, datatype, shape, offset in block, byte size]``; a message names the
block (``[segment, offset, size]``) that holds all of its tensors. A tensor in client CUDA memory is
``[name, datatype, shape, -1, byte size, region, offset]`` (the region's handle is opened here: cuda.py), and an
output written into the device buffer its request offered is sent back as ``[name, datatype, shape, -1, size]``.
"""

from __future__ import annotations

import threading

import numpy as np

from . import cuda, datatypes, dlpack
from .dlpack import KDL_CUDA
from .errors import TritonModelException
from .runtime import STATE
from .shm import ALIGN, decode_bytes_elements, encode_bytes_elements

#: Triton's message for ``as_numpy()`` on a GPU tensor.
GPU_AS_NUMPY = "Tensor is stored in GPU and cannot be converted to NumPy."


class _OnDevice:
    """Where a device tensor's bytes are: a CUDA device, a pointer in this process, and what keeps them valid
    (a DLPack capsule a model gave, or nothing for client regions, which the server holds for the request)."""

    __slots__ = ("device", "pointer", "shape", "nbytes", "dlpack_type", "keep")

    def __init__(self, device: int, pointer: int, shape, nbytes: int, dlpack_type: int, keep=None) -> None:
        self.device = device
        self.pointer = pointer
        self.shape = list(shape)
        self.nbytes = nbytes
        self.dlpack_type = dlpack_type
        self.keep = keep


class Tensor:
    """A named tensor backed by a numpy array, or by GPU memory (Triton's ``pb_utils.Tensor``; ``is_cpu()`` tells)."""

    __slots__ = ("_name", "_array", "_datatype", "_dev")

    def __init__(self, name: str, tensor, dtype=None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"Tensor name must be a str, got {type(name).__name__}")
        array = tensor if isinstance(tensor, np.ndarray) else np.asarray(tensor, dtype=dtype)
        try:
            datatype = datatypes.from_numpy(array.dtype)
        except TypeError:
            raise TritonModelException(f"Tensor '{name}': numpy dtype {array.dtype} has no Triton datatype") from None
        self._name = name
        self._array = array
        self._datatype = datatype
        self._dev = None

    @classmethod
    def _wrap(cls, name: str, array: np.ndarray, datatype: str) -> "Tensor":
        t = cls.__new__(cls)
        t._name = name
        t._array = array
        t._datatype = datatype
        t._dev = None
        return t

    @classmethod
    def _on_device(cls, name: str, datatype: str, dev: _OnDevice) -> "Tensor":
        """A GPU tensor over memory this process can address (a client region, or a model's DLPack tensor)."""
        t = cls.__new__(cls)
        t._name = name
        t._array = None
        t._datatype = datatype
        t._dev = dev
        return t

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        if self._dev is not None:
            raise TritonModelException(GPU_AS_NUMPY)
        return self._array

    def triton_dtype(self) -> str:
        return self._datatype

    def shape(self) -> list[int]:
        return list(self._dev.shape) if self._dev is not None else list(self._array.shape)

    def is_cpu(self) -> bool:
        return self._dev is None

    def to_dlpack(self):
        """A DLPack capsule viewing this tensor's memory (no copy); BYTES tensors have no DLPack form."""
        if self._datatype == "BYTES":
            raise TritonModelException(f"Tensor '{self._name}': BYTES tensors cannot be exported to DLPack")
        d = self._dev
        if d is not None:
            return dlpack.make_capsule(d.pointer, self._datatype, d.shape, d.dlpack_type, d.device, self)
        return np.ascontiguousarray(self._array).__dlpack__()

    def __dlpack__(self, *args, **kwargs):
        if self._dev is not None:
            # No work is pending on a client region or a synchronized output: the stream argument needs no wait.
            return self.to_dlpack()
        return np.ascontiguousarray(self._array).__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        d = self._dev
        return (d.dlpack_type, d.device) if d is not None else (1, 0)  # kDLCPU, device 0

    @staticmethod
    def from_dlpack(name: str, dlpack) -> "Tensor":
        """A tensor from a DLPack capsule or any object with ``__dlpack__`` (a torch tensor, say), no copy. A CUDA
        tensor stays on its GPU (``is_cpu()`` False): an output in it is copied device to device, into the client's
        CUDA region when the request placed the output there, else to the host."""
        if hasattr(dlpack, "__dlpack__"):
            source = dlpack
            device = source.__dlpack_device__() if hasattr(source, "__dlpack_device__") else (1, 0)
        else:
            source = _Capsule(dlpack)
            device = _capsule_device(dlpack)
        if device[0] == KDL_CUDA:
            return _from_cuda_dlpack(name, dlpack, source)
        if device[0] not in (1, 3):  # kDLCPU, kDLCUDAHost
            raise TritonModelException(
                f"Tensor '{name}': DLPack tensor is on device type {device[0]}; Nereid's python backend takes CPU "
                "and CUDA tensors"
            )
        try:
            array = np.from_dlpack(source)
        except (BufferError, TypeError, RuntimeError) as e:
            raise TritonModelException(f"Tensor '{name}': cannot read DLPack tensor: {e}") from None
        if not array.flags.c_contiguous:
            raise TritonModelException(f"Tensor '{name}': DLPack tensor must be C-contiguous")
        return Tensor(name, array)

    def __repr__(self) -> str:
        where = f", device=cuda:{self._dev.device}" if self._dev is not None else ""
        return f"Tensor(name={self._name!r}, datatype={self._datatype}, shape={self.shape()}{where})"



def _capsule_device(capsule) -> tuple[int, int]:
    """The device of a bare DLPack capsule (``torch.utils.dlpack.to_dlpack(t)``, Triton's usual spelling)."""
    try:
        d = dlpack.describe(capsule)
    except ValueError:
        return (1, 0)  # numpy's import below says what is wrong with it
    return (d.device_type, d.device_id)


def _from_cuda_dlpack(name: str, given, source) -> Tensor:
    """A GPU tensor over a producer's CUDA memory: the capsule is kept (not consumed), so the producer's memory
    lives as long as this Tensor. Triton's rule: C-contiguous only."""
    capsule = given if not hasattr(given, "__dlpack__") else source.__dlpack__()
    try:
        d = dlpack.describe(capsule)
    except ValueError as e:
        raise TritonModelException(f"Tensor '{name}': {e}") from None
    return Tensor._on_device(name, d.datatype, _OnDevice(d.device_id, d.pointer, d.shape, d.nbytes, d.device_type, capsule))


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
    for desc in descs:
        name, datatype, shape, off, nbytes = desc[:5]
        shape = tuple(shape)
        if off == -1:
            slot = cuda.REGIONS.slot(desc[5], desc[6], nbytes)
            dev = _OnDevice(slot.device, slot.pointer, shape, nbytes, slot.dlpack_type)
            out.append(Tensor._on_device(name, datatype, dev))
            continue
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


def write_tensors(tensors, slots=None) -> tuple[list | None, list]:
    """Copies tensors into one new block of this process's segments: ``(block, descriptors)``.

    ``slots``: per tensor, the device buffer (cuda.Slot) its request offered in client CUDA memory, or None. A fixed-size
    tensor that fits its slot goes there (device to device for a GPU tensor, host to device for a host one; nothing
    to copy when the engine already wrote it in place) and is described with offset -1; a GPU tensor without a slot
    is copied device to host straight into the block."""
    arena = STATE.arena
    assert arena is not None
    descs: list = [None] * len(tensors)
    staged = []  # (index, tensor, host data or None for a GPU tensor, offset in the block, bytes)
    placed = []  # (index, tensor, slot, bytes)
    total = 0
    for i, t in enumerate(tensors):
        d = t._dev
        if t._datatype != "BYTES" and slots:
            slot = slots[i]
            n = d.nbytes if d is not None else t._array.nbytes
            if slot is not None and n <= slot.nbytes:
                placed.append((i, t, slot, n))
                continue
        if d is not None:
            staged.append((i, t, None, total, d.nbytes))
            total += (d.nbytes + ALIGN - 1) & _MASK
            continue
        a = t._array
        if t._datatype == "BYTES":
            data = encode_bytes_elements(a.reshape(-1) if a.ndim else a.reshape(1))
            n = len(data)
        else:
            # The wire is little-endian; a big-endian array is swapped on the way in.
            data = a if a.dtype.byteorder != ">" else a.astype(a.dtype.newbyteorder("<"))
            n = a.nbytes
        staged.append((i, t, data, total, n))
        total += (n + ALIGN - 1) & _MASK
    if total > 0 and not placed:
        offered = _take_preplaced(staged, descs)
        if offered is not None:
            return offered, descs
    gpu_staged = [(t, rel, n) for _i, t, data, rel, n in staged if data is None and n]
    if placed or gpu_staged:
        _synchronize_producers([t for _i, t, _s, _n in placed] + [t for t, _r, _n in gpu_staged])
    if placed:
        _to_device_slots(placed)
    for i, t, _slot, n in placed:
        descs[i] = [t._name, t._datatype, t.shape(), -1, n]
    block = None
    if total > 0:
        seg, off, view = arena.alloc(total)
        block = [seg, off]
        for _i, t, data, rel, n in staged:
            if n and data is not None:
                if type(data) is bytes:
                    view[rel : rel + n] = np.frombuffer(data, np.uint8)
                elif data.flags.c_contiguous:
                    view[rel : rel + n] = data.reshape(-1).view(np.uint8)
                else:
                    # Copies any other layout (non-contiguous, negative strides) into C order.
                    np.copyto(view[rel : rel + n].view(data.dtype).reshape(data.shape), data, casting="no")
        if gpu_staged:
            rt = cuda.runtime()
            base = view.ctypes.data
            for t, rel, n in gpu_staged:
                rt.copy(t._dev.device, base + rel, t._dev.pointer, n)  # device to host: synchronous
    for i, t, _data, rel, n in staged:
        descs[i] = [t._name, t._datatype, t.shape(), rel if n else 0, n]
    return block, descs


class _Preplaced(threading.local):
    """A block an engine already filled with a batch's outputs, laid out as write_tensors lays them out (the
    TensorRT engine copies device outputs straight into it: one copy instead of device -> staging -> block).
    Per thread: each instance runs on its own."""

    block: list | None = None
    base: int = 0


PREPLACED = _Preplaced()


def preplace(seg: int, off: int, base: int) -> None:
    """Offers the block at (seg, off), whose bytes start at address ``base``, to the next write_tensors on this thread
    (an offer never taken, as when execute failed after the copies, is released by the next one)."""
    if PREPLACED.block is not None:
        STATE.arena.free(*PREPLACED.block)
    PREPLACED.block = [seg, off]
    PREPLACED.base = base


def _take_preplaced(staged, descs) -> list | None:
    """The offered block when every tensor already lies in it where the layout puts it (descs filled in);
    otherwise None, the offered block released, and the tensors are copied as usual."""
    block, base = PREPLACED.block, PREPLACED.base
    if block is None:
        return None
    PREPLACED.block = None
    ok = all(
        data is not None and type(data) is not bytes and (n == 0 or data.__array_interface__["data"][0] == base + rel)
        for _i, _t, data, rel, n in staged
    )
    if not ok:
        STATE.arena.free(*block)
        return None
    for i, t, _data, rel, n in staged:
        descs[i] = [t._name, t._datatype, t.shape(), rel if n else 0, n]
    return block


def _synchronize_producers(tensors) -> None:
    """Kernels a model queued on any stream must have finished before its GPU tensors are read."""
    rt = None
    for dev in {t._dev.device for t in tensors if t._dev is not None}:
        rt = rt or cuda.runtime()
        rt.synchronize(dev)


def _to_device_slots(placed) -> None:
    """Writes tensors into the client's device slots; the copies must have landed before the host answers the
    client, so each device written is synchronized after (a device-to-device cudaMemcpy does not wait)."""
    rt = cuda.runtime()
    written = set()
    for _i, t, slot, n in placed:
        d = t._dev
        if d is not None and d.pointer == slot.pointer:
            continue  # the engine wrote it in place (and synchronized its stream)
        if d is not None:
            rt.copy(slot.device, slot.pointer, d.pointer, n)
        else:
            a = t._array
            if a.dtype.byteorder == ">":
                a = a.astype(a.dtype.newbyteorder("<"))
            a = np.ascontiguousarray(a)  # a no-op for the usual C-ordered output; alive until the copy returns
            rt.copy(slot.device, slot.pointer, a.ctypes.data, n)
        written.add(slot.device)
    for dev in written:
        rt.synchronize(dev)


def slot_tensor(slot, name: str, datatype: str, shape) -> Tensor | None:
    """A GPU tensor over an output slot the request offered, for an engine that writes its output in place
    (the pytorch engine copies forward()'s result into it); None when the tensor would not fit."""
    if slot is None or datatype == "BYTES" or datatype not in dlpack.TO_DLPACK:
        return None
    n = datatypes.TO_NUMPY[datatype].itemsize
    for dim in shape:
        n *= dim
    if n > slot.nbytes:
        return None
    return Tensor._on_device(name, datatype, _OnDevice(slot.device, slot.pointer, shape, n, slot.dlpack_type))

