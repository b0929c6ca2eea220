"""The answer shapes a plan may write for ``query_text``: rarer refusals."""

from __future__ import annotations

import pytest

from llassembly.analysis.queries import parse_answer_shape


@pytest.mark.parametrize("name", ["", "  "])
def test_a_field_of_an_answer_shape_needs_a_name(name: str) -> None:
    with pytest.raises(ValueError, match=r"^a field of the answer shape needs a name$"):
        parse_answer_shape(f'{{"ok": "bool", "{name}": "text"}}')
