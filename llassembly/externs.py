"""The import path ``llassembly.externs`` of earlier releases (the code moved)."""

from __future__ import annotations

from llassembly.machine.externs import (
    Extern,
    Param,
    check_sync_tools,
    describe_extern,
    extern_signature,
    externs_from,
    type_label,
)

__all__ = [
    "Extern",
    "Param",
    "check_sync_tools",
    "describe_extern",
    "extern_signature",
    "externs_from",
    "type_label",
]
