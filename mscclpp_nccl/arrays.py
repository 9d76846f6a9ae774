"""GPU arrays and streams as the library takes them: any array with `__cuda_array_interface__` (CuPy,
Numba, PyTorch), a PyTorch tensor (bfloat16 and fp8 too), or anything with DLPack (`__dlpack__`, JAX
arrays; through CuPy), and streams as raw handles or objects (CuPy, PyTorch, `__cuda_stream__`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .binding import DTYPE_NAMES, DTYPE_SIZES, dtype_code

_DL_CUDA, _DL_CUDA_MANAGED = 2, 13  # DLPack's device types of CUDA memory
# PyTorch's dtype names that differ from ours.
_TORCH_NAMES = {"float8_e4m3fn": "float8_e4m3", "float8_e5m2": "float8_e5m2", "half": "float16"}


@dataclass(frozen=True)
class DeviceBuffer:
    """A contiguous span of device memory and the NCCL element type it holds."""

    ptr: int
    nbytes: int
    dtype: str  # a binding.DTYPES name
    owner: Any = None  # keeps a converted view alive while the call uses it

    @property
    def count(self) -> int:
        """Elements of dtype."""
        return self.nbytes // DTYPE_SIZES[self.dtype]


def _c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> bool:
    if strides is None:
        return True
    expected = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides), strict=True):
        if dim > 1 and stride != expected:
            return False
        expected *= dim
    return True


def _from_interface(cai: dict[str, Any], dtype: Any, owner: Any) -> DeviceBuffer:
    import numpy as np

    ptr = int(cai["data"][0])
    shape = tuple(int(d) for d in cai["shape"])
    item = np.dtype(cai["typestr"])
    if not _c_contiguous(shape, cai.get("strides"), item.itemsize):
        raise ValueError("the array is not C-contiguous (make a contiguous copy first)")
    count = 1
    for dim in shape:
        count *= dim
    nbytes = count * item.itemsize
    name = _dtype_name(dtype) if dtype is not None else _numpy_name(item)
    return DeviceBuffer(ptr, nbytes, name, owner)


def _numpy_name(item: Any) -> str:
    name = item.name
    try:
        return _dtype_name(name)
    except ValueError:
        raise ValueError(
            f"NCCL has no data type for {name!r}: pass dtype= (e.g. a uint16 array with dtype='bfloat16')"
        ) from None


def _dtype_name(dtype: Any) -> str:
    """Our name of a dtype name, NumPy dtype or ncclDataType_t."""
    return DTYPE_NAMES[dtype_code(dtype)]


def _is_torch_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr") and hasattr(x, "element_size")


def device_buffer(x: Any, dtype: Any = None) -> DeviceBuffer:
    """The device memory of array `x`; dtype (a name, NumPy dtype or ncclDataType_t) overrides the array's
    own, for bfloat16 or fp8 data held in a uint16 or uint8 array. TypeError for what is not a GPU array,
    ValueError for a non-contiguous one, one whose type NCCL lacks, or one that is no whole number of
    elements of dtype."""
    buf = _device_buffer(x, dtype)
    if buf.nbytes % DTYPE_SIZES[buf.dtype]:
        raise ValueError(f"{buf.nbytes} bytes is not a whole number of {buf.dtype}")
    return buf


def _device_buffer(x: Any, dtype: Any) -> DeviceBuffer:
    if _is_torch_tensor(x):
        if not x.is_cuda:
            raise TypeError("a PyTorch tensor on the CPU: NCCL needs it on a CUDA device")
        if not x.is_contiguous():
            raise ValueError("the tensor is not contiguous (call .contiguous() first)")
        own = str(x.dtype).removeprefix("torch.")
        name = _dtype_name(dtype) if dtype is not None else _dtype_name(_TORCH_NAMES.get(own, own))
        return DeviceBuffer(int(x.data_ptr()), int(x.numel()) * int(x.element_size()), name, x)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_interface(cai, dtype, x)
    if hasattr(x, "__dlpack__"):
        device_type = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else None
        if device_type not in (None, _DL_CUDA, _DL_CUDA_MANAGED):
            raise TypeError(f"a {type(x).__name__} on DLPack device type {device_type}, not on a CUDA device")
        try:
            import cupy
        except ImportError:
            raise TypeError(
                f"a {type(x).__name__} (DLPack) needs CuPy to be viewed (pip install cupy-cuda13x)"
            ) from None
        view = cupy.from_dlpack(x)  # zero-copy
        return _from_interface(view.__cuda_array_interface__, dtype, (x, view))
    raise TypeError(
        f"not a GPU array: {type(x).__name__} has neither __cuda_array_interface__ nor __dlpack__"
    )


def stream_handle(stream: Any) -> int:
    """A cudaStream_t value from a raw handle (int), a CuPy stream (.ptr), a PyTorch stream
    (.cuda_stream), an object with __cuda_stream__ (CUDA Python's protocol), or None for CuPy's current
    stream."""
    if stream is None:
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        _version, handle = stream.__cuda_stream__()
        return int(handle)
    for attr in ("ptr", "cuda_stream", "handle"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    raise TypeError(f"not a CUDA stream: {stream!r}")
