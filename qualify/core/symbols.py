"""C++ symbol names as a reviewer reads them.

`demangle` turns a mangled name (CUDA, AMDGPU and host kernels all use the Itanium C++ ABI)
into C++ through the C++ runtime's own demangler, `__cxa_demangle` in libstdc++, and
`display_name` shortens that to what a reviewer reads: the kernel and its template arguments,
without the return type and the parameter list. A name that is not mangled, or a machine
without libstdc++, keeps the name as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache

__all__ = ["demangle", "display_name"]


@lru_cache(maxsize=1)
def _cxa_demangle() -> tuple[object, object] | None:
    """libstdc++'s `__cxa_demangle` and libc's `free` (the result is malloc'ed), or None."""
    found = ctypes.util.find_library("stdc++")
    if found is None:
        return None
    try:
        demangler = ctypes.CDLL(found).__cxa_demangle
        free = ctypes.CDLL(None).free
    except (OSError, AttributeError):
        return None
    demangler.restype = ctypes.c_void_p
    demangler.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_int),
    ]
    free.argtypes = [ctypes.c_void_p]
    return demangler, free


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The C++ spelling of a mangled name (`_Z…`), or `name` itself when it is not one."""
    found = _cxa_demangle()
    if found is None or not name.startswith("_Z"):
        return name
    demangler, free = found
    status = ctypes.c_int(0)
    pointer = demangler(name.encode(), None, None, ctypes.byref(status))  # type: ignore[operator]
    if not pointer or status.value != 0:
        return name
    try:
        return ctypes.string_at(pointer).decode("utf-8", "replace")
    finally:
        free(pointer)  # type: ignore[operator]


def display_name(name: str) -> str:
    """The kernel as a reviewer reads it: `mul_mat_vec_q<(ggml_type)10, 1, true>`, no return
    type, no parameter list; `name` itself when it does not demangle."""
    text = demangle(name)
    if text == name:
        return name
    if text.endswith(")"):
        depth = 0
        for at in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[at], 0)
            if depth == 0:
                text = text[:at]
                break
    # A kernel returns void; a template instance spells its return type first.
    return text.removeprefix("void ").strip() or name
