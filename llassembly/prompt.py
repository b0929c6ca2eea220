"""The system prompt: a template that teaches the language, plus one block per tool.

The built-in template is ``llassembly/prompts/base.md``. A custom template (``prompt_path``)
replaces it. Two placeholders are filled in by plain text replacement, in one pass, so any other
braces in a template (JSON, ``{unknown}``) are left alone:

* ``{context}``: the caller's own system message (may be empty);
* ``{extern_functions}``: one block per tool (see :func:`describe_extern`).
"""

from __future__ import annotations

import enum
import json
import os
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any, Literal, get_args, get_origin

from llassembly._values import is_model, is_subclass, strip_annotation, type_label
from llassembly.errors import UsageError
from llassembly.externs import Extern

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
        return resources.files("llassembly").joinpath("prompts/base.md").read_text("utf-8")
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


def extern_signature(extern: Extern) -> str:
    """Return ``name(a: int, b: str) -> int`` (``-> (int, int)`` for two results)."""
    args = ", ".join(f"{p.name}: {type_label(p.annotation)}" for p in extern.params)
    if extern.n_results == 0:
        returns = "nothing"
    elif extern.n_results == 1:
        returns = type_label(extern.result_types[0] if extern.result_types else Any)
    else:
        returns = "(" + ", ".join(type_label(t) for t in extern.result_types) + ")"
    return f"{extern.name}({args}) -> {returns}"


def describe_extern(extern: Extern) -> str:
    """Return the prompt block for one tool: signature, description, arguments, results, example.

    Example:
        >>> from llassembly.externs import externs_from
        >>> def make_one_step(x: int, y: int) -> int:
        ...     '''Move one step towards (x, y).'''
        ...     return 0
        >>> print(describe_extern(externs_from([make_one_step])["make_one_step"]))
        ## make_one_step
        make_one_step(x: int, y: int) -> int
        Move one step towards (x, y).
        Arguments, push in this order: x, y
        Returns 1 value.
        Example:
            PUSH 5             ; x
            PUSH 7             ; y
            CALL make_one_step
            POP R1             ; result
    """
    lines = [f"## {extern.name}", extern_signature(extern)]
    if extern.description:
        lines.append(extern.description)
    if not extern.params:
        lines.append("Arguments: none.")
    elif any(p.description for p in extern.params):
        lines.append("Arguments, push in this order:")
        lines += [f"  {p.name}: {p.description or type_label(p.annotation)}" for p in extern.params]
    else:
        lines.append("Arguments, push in this order: " + ", ".join(p.name for p in extern.params))
    n = extern.n_results
    if n == 0:
        lines.append("Returns nothing: do not POP after it.")
    elif n == 1:
        lines.append("Returns 1 value.")
    else:
        lines.append(f"Returns {n} values: the first POP gets the first one.")

    example = [(f"PUSH {_operand(p.annotation, i)}", p.name) for i, p in enumerate(extern.params)]
    example.append((f"CALL {extern.name}", ""))
    if n == 1:
        example.append(("POP R1", "result"))
    else:
        example += [(f"POP R{i + 1}", f"result {i + 1}") for i in range(n)]
    width = max(len(code) for code, _ in example) + 1
    lines.append("Example:")
    lines += [
        f"    {code.ljust(width)}; {note}" if note else f"    {code}" for code, note in example
    ]
    return "\n".join(lines)


def _operand(annotation: Any, index: int) -> str:
    """Return a literal that fits ``annotation``, for the call example."""
    sample = _sample(annotation)
    if isinstance(sample, bool):
        return "1" if sample else "0"
    if isinstance(sample, int):
        return str(5 + 2 * index)
    if isinstance(sample, (float, str)):
        return json.dumps(sample)
    return "'" + json.dumps(sample, ensure_ascii=False) + "'"  # JSON text in single quotes


def _sample(annotation: Any, depth: int = 0) -> Any:
    """Return a small JSON-compatible value of this type."""
    ann = strip_annotation(annotation)
    origin, args = get_origin(ann), get_args(ann)
    if is_model(ann):
        fields = ann.model_fields.items() if depth < 3 else ()
        return {name: _sample(f.annotation, depth + 1) for name, f in fields}
    if origin is Literal:
        return args[0]
    if is_subclass(ann, enum.Enum):
        return next(iter(ann)).value
    simple: dict[Any, Any] = {bool: True, float: 0.5, str: "text", dict: {}, list: []}
    if ann in simple:
        return simple[ann]
    if origin in (list, tuple, set, frozenset):
        return [_sample(args[0], depth + 1)] if args and depth < 3 else []
    if origin is dict:
        return {}
    return 1  # int, Any and anything else: a number
