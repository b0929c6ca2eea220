"""The system prompt: a template that teaches the language, plus one block per tool.

The built-in template is ``llassembly/prompts/base.md``. A custom template (``prompt_path``)
replaces it. Two placeholders are filled in by plain text replacement, in one pass, so any other
braces in a template (JSON, ``{unknown}``) are left alone:

* ``{context}``: the caller's own system message (may be empty);
* ``{extern_functions}``: one block per tool (see :func:`describe_extern`, which lives with
  :class:`~llassembly.externs.Extern`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from importlib import resources

from llassembly.errors import UsageError
from llassembly.machine.externs import (
    Extern,
    describe_extern,
    extern_signature,
)

__all__ = ["build_system_prompt", "describe_extern", "extern_signature", "load_template"]

_CONTEXT = "{context}"
_TOOLS = "{extern_functions}"
_PLACEHOLDER = re.compile(re.escape(_CONTEXT) + "|" + re.escape(_TOOLS))


def load_template(prompt_path: str | os.PathLike[str] | None = None) -> str:
    """Return the template at ``prompt_path``, or the built-in one when it is ``None``.

    Raises:
        UsageError: ``prompt_path`` cannot be read.
    """
    if prompt_path is None:
        return (
            resources.files("llassembly.integration").joinpath("prompts/base.md").read_text("utf-8")
        )
    try:
        with open(prompt_path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        msg = f"cannot read the prompt template {os.fspath(prompt_path)!r}: {exc}"
        raise UsageError(msg) from exc


def build_system_prompt(
    externs: Mapping[str, Extern],
    context: str = "",
    prompt_path: str | os.PathLike[str] | None = None,
) -> str:
    """Return the system prompt for these tools.

    Args:
        externs: The tools the plan may call, as built by :func:`llassembly.externs.externs_from`.
        context: The caller's system message text, put where the template says ``{context}``.
        prompt_path: A template file to use instead of the built-in one. It may use either
            placeholder or none; other ``{...}`` text is kept as written.

    Returns:
        The prompt text.

    Example:
        >>> from llassembly.externs import externs_from
        >>> def ping(host: str) -> bool:
        ...     '''Check that a host answers.'''
        ...     return True
        >>> "## ping" in build_system_prompt(externs_from([ping]), "You run the network.")
        True
    """
    text = load_template(prompt_path)
    blocks = "\n\n".join(describe_extern(e) for e in externs.values()) or "(no tools)"
    context = context.strip()
    if not context:  # drop the placeholder and the blank line after it
        text = re.sub(r"\{context\}[ \t]*\n?(?:[ \t]*\n)?", "", text)
    # One pass, so a placeholder spelled inside the context or a tool description stays as is.
    fill = {_CONTEXT: context, _TOOLS: blocks}
    return _PLACEHOLDER.sub(lambda m: fill[m.group(0)], text).strip() + "\n"
