"""The system prompt: a template that teaches the language, plus one block per tool.

The built-in template is ``llassembly/prompts/base.md``. A custom template (``prompt_path``)
replaces it. Three placeholders are filled in by plain text replacement, in one pass, so any
other braces in a template (JSON, ``{unknown}``) are left alone:

* ``{context}``: the caller's own system message (may be empty);
* ``{extern_functions}``: one block per tool (see :func:`describe_extern`, which lives with
  :class:`~llassembly.externs.Extern`), each structured type's fields described once;
* ``{structures}``: how a plan reads and builds structured values and text
  (``prompts/structures.md``), only when some tool takes or returns a structure (a record, a
  map, or a value of unknown type; a list of plain values is shown in its tool's block) or has
  a parameter with a default; empty otherwise, so a toolset of plain values gets a short
  prompt;
* ``{queries}``: how a plan reads prose with ``query_text`` (``prompts/queries.md``), only when
  queries are on (the built-in query is among the tools; it gets no tool block of its own).
  A template without this placeholder gets the section after the tools' blocks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from importlib import resources

from llassembly.analysis.shapes import Shape, shape_of
from llassembly.errors import UsageError
from llassembly.machine.externs import (
    Extern,
    ToolSpec,
    describe_extern,
    extern_signature,
    externs_of,
)
from llassembly.machine.query import is_query

__all__ = [
    "build_system_prompt",
    "describe_extern",
    "extern_signature",
    "load_template",
    "uses_structures",
]

_CONTEXT = "{context}"
_TOOLS = "{extern_functions}"
_STRUCTURES = "{structures}"
_QUERIES = "{queries}"
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in (_CONTEXT, _TOOLS, _STRUCTURES, _QUERIES)))
_PLAIN = frozenset({"int", "float", "number", "text", "decimal", "none"})


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


def uses_structures(externs: Mapping[str, Extern]) -> bool:
    """Whether some tool takes or returns a structure (a list of plain values aside) or a
    value of unknown type, or has a parameter with a default: the prompt then teaches
    structured values (``{structures}``)."""
    for extern in externs.values():
        annotations = [p.annotation for p in extern.params] + list(extern.result_types)
        if extern.n_results == 1 and not extern.result_types:
            return True  # no return annotation: anything may come back
        if any(p.has_default for p in extern.params):
            return True
        if any(_structured(shape_of(annotation)) for annotation in annotations):
            return True
    return False


def _structured(shape: Shape) -> bool:
    """A shape with fields (an object, a map, a fixed list), or not known; a list of plain
    values is not (its tool's block shows how to read one)."""
    options = shape.options if shape.kind == "union" else (shape,)
    for option in options:
        if option.kind == "list" and option.item is not None:
            if _structured(option.item):
                return True
        elif option.kind not in _PLAIN:
            return True
    return False


def _section(name: str) -> str:
    files = resources.files("llassembly.integration")
    return files.joinpath(f"prompts/{name}.md").read_text("utf-8").strip() + "\n"


def build_system_prompt(
    externs: ToolSpec,
    context: str = "",
    prompt_path: str | os.PathLike[str] | None = None,
) -> str:
    """Return the system prompt for these tools.

    Args:
        externs: The tools the plan may call: a list of LangChain tools, functions or
            externs, or a mapping of tool name to tool (see
            :data:`~llassembly.machine.externs.ToolSpec`).
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
    by_name = externs_of(externs, param="externs")
    text = load_template(prompt_path)
    described: set[str] = set()  # each structured type's fields once in the prompt
    tools = [e for e in by_name.values() if not is_query(e)]
    blocks = "\n\n".join(describe_extern(e, described) for e in tools) or "(no tools)"
    context = context.strip()
    if not context:  # drop the placeholder and the blank line after it
        text = re.sub(r"\{context\}[ \t]*\n?(?:[ \t]*\n)?", "", text)
    structures = _section("structures") if uses_structures(by_name) else ""
    if not structures:  # drop the placeholder's line
        text = re.sub(r"\n\{structures\}[ \t]*(?=\n)", "", text)
    queries = _section("queries") if any(map(is_query, by_name.values())) else ""
    if queries and _QUERIES not in text:  # a template of the user's: after the tools
        blocks = f"{blocks}\n\n{queries}"
    if not queries:
        text = re.sub(r"\n\{queries\}[ \t]*(?=\n)", "", text)
    # One pass, so a placeholder spelled inside the context or a tool description stays as is.
    fill = {_CONTEXT: context, _TOOLS: blocks, _STRUCTURES: structures, _QUERIES: queries}
    return _PLACEHOLDER.sub(lambda m: fill[m.group(0)], text).strip() + "\n"
