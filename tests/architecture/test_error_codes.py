"""The error codes as a client reads them: docs/api.md lists exactly the codes the code has."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from app.core.errors import ErrorCode

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def documented_codes() -> set[str]:
    """The codes in the `code` column of the tables under docs/api.md's "## Errors"."""
    section = API_DOC.read_text().split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    codes: set[str] = set()
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) > 3 and not set(cells[2].strip()) <= {"-"}:
            codes |= set(re.findall(r"`([a-z][a-z0-9_]*)`", cells[2]))
    return codes


def test_every_error_code_is_documented_and_every_documented_code_exists() -> None:
    in_code = set(get_args(ErrorCode))

    assert in_code - documented_codes() == set(), "codes missing from docs/api.md's Errors"
    assert documented_codes() - in_code == set(), "documented codes ErrorCode does not have"
