"""System prompts as Markdown templates; `${to_day}` is rendered as YYYYMMDD.

`text_react` (the text-mode ReAct format) also takes `${tools}`: `render_template`.
"""

from __future__ import annotations

from datetime import date
from functools import cache
from importlib import resources
from string import Template


@cache
def _template(name: str) -> Template:
    return Template(resources.files(__name__).joinpath(f"{name}.md").read_text("utf-8"))


def load_prompts(names: tuple[str, ...]) -> None:
    """Read the named templates now, so no file is read inside a running graph."""
    for name in names:
        _template(name)


def render_prompt(names: tuple[str, ...], *, today: date | None = None) -> str:
    """Join the named templates and fill in today's date."""
    to_day = (today or date.today()).strftime("%Y%m%d")
    return "\n\n".join(_template(name).safe_substitute(to_day=to_day).strip() for name in names)


def render_template(name: str, **values: str) -> str:
    """One template with `values` (and today's date) filled in."""
    to_day = date.today().strftime("%Y%m%d")
    return _template(name).safe_substitute({"to_day": to_day, **values}).strip()
