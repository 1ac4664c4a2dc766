"""Answers are checked against their interrupt payload before anything resumes."""

from __future__ import annotations

from typing import Any

import pytest

from tools.interrupts import (
    Cancelled,
    InvalidAnswer,
    confirm_payload,
    input_payload,
    multi_select_payload,
    options_of,
    response_schema,
    select_payload,
    validate_answer,
)

SELECT = select_payload("选一个", options_of(["a", "b"]))
MULTI = multi_select_payload("选几个", options_of(["a", "b", "c"]), min=2)


@pytest.mark.parametrize(
    ("payload", "answer", "value"),
    [
        (input_payload("城市？"), {"value": " 北京 "}, "北京"),
        (SELECT, {"value": "b"}, "b"),
        (MULTI, {"value": ["a", "c"]}, ["a", "c"]),
        (confirm_payload("继续？"), {"value": False}, False),
    ],
)
def test_a_fitting_answer_gives_its_value(payload: Any, answer: Any, value: Any) -> None:
    assert validate_answer(payload, answer) == value


@pytest.mark.parametrize(
    ("payload", "answer", "value"),
    [
        (input_payload("城市？"), " 北京 ", "北京"),
        (SELECT, "b", "b"),
        (MULTI, ["a", "c"], ["a", "c"]),
        (confirm_payload("继续？"), True, True),
    ],
)
def test_a_bare_value_is_shorthand_for_value_of_it(payload: Any, answer: Any, value: Any) -> None:
    assert validate_answer(payload, answer) == value


@pytest.mark.parametrize(
    ("payload", "answer", "complaint"),
    [
        (input_payload("城市？"), {"value": "  "}, "非空"),
        (input_payload("城市？"), {"text": "北京"}, "格式"),
        (SELECT, "z", "不在可选项"),
        (confirm_payload("继续？"), "yes", "true 或 false"),
        (SELECT, {"value": "z"}, "不在可选项"),
        (MULTI, {"value": ["a"]}, "至少选择 2 项"),
        (MULTI, {"value": ["a", "a"]}, "至少选择 2 项"),
        (MULTI, {"value": "a"}, "列表"),
        (confirm_payload("继续？"), {"value": "yes"}, "true 或 false"),
    ],
)
def test_a_wrong_answer_is_refused_with_a_reason(payload: Any, answer: Any, complaint: str) -> None:
    with pytest.raises(InvalidAnswer, match=complaint):
        validate_answer(payload, answer)


def test_a_cancel_is_not_an_answer() -> None:
    with pytest.raises(Cancelled):
        validate_answer(SELECT, {"cancelled": True})


def test_the_response_schema_names_the_allowed_values() -> None:
    assert response_schema(SELECT)["properties"]["value"] == {"type": "string", "enum": ["a", "b"]}
    multi = response_schema(MULTI)["properties"]["value"]
    assert multi["minItems"] == 2 and multi["items"]["enum"] == ["a", "b", "c"]
    assert response_schema(confirm_payload("?"))["properties"]["value"] == {"type": "boolean"}
