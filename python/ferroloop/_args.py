"""Argument checks of the wrappers: a value of the wrong type is a ``TypeError`` naming the
argument, where the native layer's conversion said only "'int' object is not an instance of
'str'" (Node refuses the same values with an ``InvalidArgumentError`` naming the option)."""

from __future__ import annotations

import os
from typing import Optional


def optional_str(name: str, value: object) -> None:
    """Refuses ``value`` unless it is ``None`` or a ``str``."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")


def optional_bool(name: str, value: object) -> None:
    """Refuses ``value`` unless it is ``None`` (the default) or a ``bool``."""
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")


def optional_str_path(name: str, value: object) -> Optional[str]:
    """``value`` as a path of ``str`` (a ``str`` or an ``os.PathLike`` of one), or ``None``.
    Refuses bytes and a path of bytes, which ``os.fspath`` takes, naming ``name``: the native
    layer said "'bytes' object is not an instance of 'str'", naming neither the option nor that
    bytes are refused."""
    if value is None:
        return None
    path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(path, str):
        raise TypeError(f"{name} must be a str or a path of str, not {type(value).__name__}")
    return path
