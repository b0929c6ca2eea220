"""Text with placeholders: ``SAY`` answers and string operands, and how values read in them.

A placeholder (``{R2}``, ``{best_city}``, ``{[table + ESI*4]}``, ``{R1.items[0].title}``, with an
optional format: ``{R1:.2f}``, see :func:`render`) names what to put in the text; which braces
are a placeholder, which are text and which are refused is *Text* in ``docs/language.md``. The
parser (:mod:`llassembly.language.parser`) reads a text operand as a
:class:`~llassembly.language.program.Template`, and each placeholder of a ``SAY``'s text becomes
one more operand of the instruction, so the verifier and the path analysis check them like any
operand: a placeholder that names nothing is refused before the plan runs.
"""

from __future__ import annotations

import contextlib
import decimal
import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from llassembly.errors import clip
from llassembly.language.limits import MAX_SAY_PLACEHOLDERS
from llassembly.language.program import Imm, Name, Operand, Value

_REF = (
    r"(?:\[[^\[\]{}\"'\n]*\]|[A-Za-z_.$@?])[\w.$@?]*"  # [memory] or a name (R1, best), .name
    r"(?:\[[^\[\]{}\n]*\][\w.$@?]*)*"  # path steps: [0], ["key"], then .name
)
_SPEC = r"[<>^]?0?\d{0,2}[,_]?(?:\.\d{1,2})?[dfeg%s]?"
PLACEHOLDER = re.compile(rf"(?P<ref>{_REF})(?::(?P<spec>{_SPEC}))?")
"""What a placeholder holds between its braces: ``NAME``, ``[memory]`` or ``R1.path[0]``, with
an optional ``:format`` (matched whole)."""
# One ``{...}`` (no brace or line break inside): escaped as ``{{...}}``, a placeholder, or braces
# that read as none (a placeholder's text never holds a brace, so the second alternative matches
# exactly where the placeholder pattern matches the whole text inside the braces).
_BRACED = re.compile(
    r"\{\{(?P<escaped>[^{}\n]*)\}\}"
    rf"|\{{(?P<ref>{_REF})(?::(?P<spec>{_SPEC}))?\}}"
    r"|\{(?P<miss>[^{}\n]*)\}"
)
# Braces whose text starts as a placeholder does (a name, "[", or ":"/"!" of a format) are meant
# as one; any other braces ({"a": 1}, {}, {3}, {2,5}) are plain text.
_MEANT = re.compile(r"\s*[A-Za-z_.$@?\[:!]")
_FORMATS = "{R1:.2f} (2 decimals), {R1:,} (thousands), {R1:02} (zero padded), {R1:>8} (width)"


def _braces(text: str) -> Iterator[re.Match[str]]:
    """Each ``{...}`` of ``text`` meant as a placeholder: one (group ``ref``, and ``spec``), one
    escaped as ``{{...}}`` (``escaped``), or braces meant as one that do not read as one (``miss``:
    ``{ R1 }``, ``{R1!r}``, ``{R1:x}``). Other braces (``{"a": 1}``, ``{}``, ``{3}``) are plain text
    and not listed. Linear in the length of ``text``: each match stops at the next brace."""
    for match in _BRACED.finditer(text):
        if match["ref"] is not None or _MEANT.match(match["escaped"] or match["miss"] or ""):
            yield match


def split_template(text: str) -> tuple[list[str], list[tuple[str, str, int]]]:
    """The pieces of ``text`` around its placeholders, and each placeholder as ``(what it names, its
    format, its index in text)``; escaped ``{{...}}`` are folded into the pieces. ``text`` has no
    near miss (:func:`near_misses`: the parser refuses those before it splits a text). Stops
    after :data:`MAX_SAY_PLACEHOLDERS` + 1 placeholders."""
    pieces: list[list[str]] = [[]]  # the parts of each piece, joined once at the end
    found: list[tuple[str, str, int]] = []
    last = 0
    for braces in _braces(text):
        pieces[-1].append(text[last : braces.start()])
        last = braces.end()
        if braces["escaped"] is not None:
            pieces[-1].append("{" + braces["escaped"] + "}")
            continue
        pieces.append([])
        found.append((braces["ref"], braces["spec"] or "", braces.start()))
        if len(found) > MAX_SAY_PLACEHOLDERS:
            break
    pieces[-1].append(text[last:])
    return ["".join(piece) for piece in pieces], found


def in_json_strings(pieces: Sequence[str]) -> tuple[bool, ...]:
    """For each placeholder between ``pieces`` (a template's text around them), whether it
    stands inside a string of JSON text: text that opens as a JSON object or array and closes
    as one, its quotes paired (what other placeholders fill in between is theirs). Such a
    placeholder's value is written as JSON writes a string's characters, so whatever it holds
    (a quote, a line break, text that would close the string) stays in that one string."""
    inside, found = False, []
    for piece in pieces:
        escaped = False
        for char in piece:
            if escaped:
                escaped = False
            elif inside and char == "\\":
                escaped = True
            elif char == '"':
                inside = not inside
        found.append(inside)
    ends = pieces[0].lstrip()[:1] + pieces[-1].rstrip()[-1:]
    return (
        tuple(found[:-1]) if ends in ("{}", "[]") and not found[-1] else (False,) * len(found[:-1])
    )


@functools.lru_cache(maxsize=256)  # (a plan's checks ask it of one long text at every read)
def has_placeholders(text: str) -> bool:
    """Whether ``text`` holds a placeholder, or braces meant as one that do not read as one."""
    return any(b["escaped"] is None for b in _braces(text))


def near_misses(text: str, where: str) -> Iterator[tuple[int, str]]:
    """Each ``{...}`` of ``text`` meant as a placeholder that does not read as one (``{ R1 }``,
    ``{R1!r}``, ``{R1:x}``): its index, and why it is none and the placeholder it was probably
    meant to be (``where`` is the text's name): the text would reach a tool or the answer as
    written, so the parser refuses it."""
    for braces in _braces(text):
        if (inner := braces["miss"]) is None:
            continue
        name, sep, rest = inner.strip().partition(":")
        if "!" in name:
            name, sep, rest = name.partition("!")
        name = name.strip()
        plain = PLACEHOLDER.fullmatch(name) is not None
        meant = "{" + (name if plain else "R1") + "}"
        if not name:
            why = "it names no value"
            meant = "{R1" + (":" + rest.strip() if sep == ":" else "") + "}"
            if PLACEHOLDER.fullmatch(meant[1:-1]) is None:
                meant = "{R1:.2f}"
        elif not plain:
            why = f"{clip(name, 30)} is no register, name, memory or path"
        elif sep == "!":
            why = f"there are no conversions ({clip(sep + rest, 12)})"
        elif sep:
            why = f"{clip(rest, 12)!r} is no format; formats: {_FORMATS}"
        else:  # spaces around a plain name (alone, it would be a placeholder)
            why = "no spaces inside the braces"
        message = (
            f"{clip(braces[0])} in {where} is no placeholder ({why}), so it "
            f"would be passed on as written; write {meant} for a value, or "
            f"{clip('{{' + inner + '}}')} for the braces as text"
        )
        yield braces.start(), message


def render(value: Value, spec: str = "") -> str:
    """A value as a person reads it, with a format (``spec``) as Python's ``format`` writes it
    (see *Values* and *Formats* in ``docs/language.md``); a number format for text (``{R1:.2f}``
    on ``"abc"``) raises ``ValueError``.

    Example:
        >>> render(19.5), render(0.1 + 0.2), render(31.0), render(7), render("Oslo")
        ('19.5', '0.3', '31', '7', 'Oslo')
        >>> render(2712.5, ",.2f"), render(13, "02"), render(0.25, ".0%"), render(7.6, "d")
        ('2,712.50', '13', '25%', '8')
    """
    kind = spec[-1] if spec and spec[-1] in "dfeg%s" else ""
    number: Any = value
    if type(value) is str or value is None:  # NONE reads as empty text
        with contextlib.suppress(ArithmeticError):  # a number format on a number's text
            number = decimal.Decimal(value.strip()) if value else None  # ("1200.40": money)
        numeric = isinstance(number, decimal.Decimal) and number.is_finite()
        numeric = numeric and number.adjusted() <= 308
        text = kind in ("", "s") and "," not in spec and "_" not in spec
        if text and not (numeric and kind == "" and spec.startswith("0")):  # ({:02}: digits)
            return format(value or "", spec.removeprefix("0"))
        if not numeric:
            raise ValueError(f"the format {spec} is for numbers, and this is text")
    if spec:
        if kind == "s":
            raise ValueError(f"the format {spec} is for text, and this is a number")
        if kind == "d" and not isinstance(number, int):
            number = int(format(number, ".0f"))
        if kind == "" and "." in spec:  # {R1:.2}: two decimals on any number, int or float
            spec += "f"  # (Python's would refuse an int, and give 2 digits of a float: 2.7e+03)
        return format(number, spec)
    if type(value) is not float:
        return str(value)
    # whole up to 1e15, else 15 significant digits ("inf" as it is)
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else format(value, ".15g")


def template_of(operand: Operand, data: Mapping[str, Value]) -> str | None:
    """The text template ``SAY operand`` says: a string literal, or a data label holding a
    string; ``None`` for anything else (a register, a number: said as its value)."""
    value = data.get(operand.name.lower()) if isinstance(operand, Name) else None
    value = operand.value if isinstance(operand, Imm) else value
    return value if isinstance(value, str) else None
