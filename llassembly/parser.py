"""The import path ``llassembly.parser`` of earlier releases (the code moved)."""

from __future__ import annotations

from llassembly.language.parser import (
    parse,
)

__all__ = [
    "parse",
]
