"""DLPack capsules over memory this process does not own (client CUDA shared memory), and reading capsules others
made, with ctypes only: the python backend needs no torch or cupy to hand a model a GPU tensor
(``pb_utils.Tensor.to_dlpack``), and any framework that speaks DLPack (``torch.from_dlpack``) takes it without a
copy.

Ownership: a capsule made here keeps its ``owner`` (the ``Tensor`` over the memory) and the shape array alive in
``_live`` until the consumer calls the deleter (or, never consumed, the capsule is destroyed). The memory itself
belongs to whoever owns ``owner``'s memory (for client regions: the server, which holds the region until the
request is answered), so a consumer must not keep the tensor past ``execute`` (Triton's rule, too).

Threading: the deleter may run on any thread (frameworks free tensors where they like); ctypes takes the GIL for
it and ``_live`` is only touched under that lock.
"""

from __future__ import annotations

import ctypes
import threading

#: DLDeviceType values used here.
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3

#: Triton datatype -> DLPack (type code, bits). Codes: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool.
TO_DLPACK = {
    "BOOL": (6, 8),
    "INT8": (0, 8),
    "INT16": (0, 16),
    "INT32": (0, 32),
    "INT64": (0, 64),
    "UINT8": (1, 8),
    "UINT16": (1, 16),
    "UINT32": (1, 32),
    "UINT64": (1, 64),
    "FP16": (2, 16),
    "FP32": (2, 32),
    "FP64": (2, 64),
    "BF16": (4, 16),
}
FROM_DLPACK = {v: k for k, v in TO_DLPACK.items()}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

_NAME = b"dltensor"
# A private handle on the C API: argtypes set here do not leak into ctypes.pythonapi, which other code shares.
_api = ctypes.PyDLL(ctypes.pythonapi._name)
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
# Raw addresses, not py_object: the destructor runs while the capsule is being freed (no new reference allowed).
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

#: Managed tensors handed out and not yet deleted: address -> (struct, shape array, owner).
_live: dict[int, tuple] = {}
_lock = threading.Lock()


def _delete(managed) -> None:
    with _lock:
        _live.pop(ctypes.addressof(managed.contents), None)


def _destroy_capsule(capsule: int) -> None:
    # Still named "dltensor": nobody consumed it, so nobody else will call the deleter.
    if _api.PyCapsule_IsValid(capsule, _NAME):
        with _lock:
            _live.pop(_api.PyCapsule_GetPointer(capsule, _NAME), None)


_deleter = _DELETER(_delete)
_destructor = _CAPSULE_DESTRUCTOR(_destroy_capsule)


def live_count() -> int:
    """Capsules made here whose memory a consumer may still use (tests check they are all released)."""
    with _lock:
        return len(_live)


def make_capsule(pointer: int, datatype: str, shape, device_type: int, device_id: int, owner) -> object:
    """A DLPack capsule (C-contiguous, no strides) over ``pointer``; ``owner`` is kept alive until it is deleted."""
    code, bits = TO_DLPACK[datatype]
    ndim = len(shape)
    dims = (ctypes.c_int64 * max(ndim, 1))(*shape)
    managed = DLManagedTensor()
    t = managed.dl_tensor
    t.data = pointer
    t.device = DLDevice(device_type, device_id)
    t.ndim = ndim
    t.dtype = DLDataType(code, bits, 1)
    t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    t.strides = None
    t.byte_offset = 0
    managed.deleter = _deleter
    address = ctypes.addressof(managed)
    with _lock:
        _live[address] = (managed, dims, owner)
    return _api.PyCapsule_New(address, _NAME, _destructor)


class Described:
    """What a DLPack tensor is: where its bytes start, on which device, its Triton datatype and shape."""

    __slots__ = ("pointer", "device_type", "device_id", "datatype", "shape", "nbytes")

    def __init__(self, pointer: int, device_type: int, device_id: int, datatype: str, shape: list[int]) -> None:
        self.pointer = pointer
        self.device_type = device_type
        self.device_id = device_id
        self.datatype = datatype
        self.shape = shape
        n = 1
        for d in shape:
            n *= d
        self.nbytes = n * TO_DLPACK[datatype][1] // 8


def describe(capsule) -> Described:
    """Reads an unconsumed "dltensor" capsule without taking it (its destructor stays the producer's). Raises
    ValueError for a layout the backend cannot use as one span of bytes (not C-contiguous, a dtype Triton has none
    of, vector lanes)."""
    address = id(capsule)  # CPython: the object's address; the caller holds the capsule
    if not _api.PyCapsule_IsValid(address, _NAME):
        raise ValueError("not an unconsumed DLPack capsule (named 'dltensor')")
    managed = ctypes.cast(_api.PyCapsule_GetPointer(address, _NAME), ctypes.POINTER(DLManagedTensor)).contents
    t = managed.dl_tensor
    dtype = (t.dtype.code, t.dtype.bits)
    if t.dtype.lanes != 1 or dtype not in FROM_DLPACK:
        raise ValueError(f"DLPack dtype (code {t.dtype.code}, bits {t.dtype.bits}, lanes {t.dtype.lanes}) has no Triton datatype")
    shape = [int(t.shape[i]) for i in range(t.ndim)]
    if t.strides:
        expected = 1
        for i in reversed(range(t.ndim)):
            if shape[i] != 1 and int(t.strides[i]) != expected:
                raise ValueError("DLPack tensor is not contiguous in C order")
            expected *= shape[i]
    return Described(int(t.data or 0) + int(t.byte_offset), int(t.device.device_type), int(t.device.device_id), FROM_DLPACK[dtype], shape)
