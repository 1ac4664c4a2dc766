"""The graphs' configuration: the model endpoint, how it calls tools, the four guards.

`GraphSettings` extends the tools' settings, so one object configures a graph and
every tool it builds; the service extends it in turn with its own fields.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator

from tools.settings import ToolSettings


class GraphSettings(ToolSettings):
    """Model and guard settings (plus the tools'); see the README's table."""

    # Model: any OpenAI-compatible chat endpoint.
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    openai_model: str | None = None
    openai_timeout_s: float = Field(60.0, gt=0, validation_alias="OPENAI_TIMEOUT")
    openai_max_retries: int = Field(2, ge=0, validation_alias="OPENAI_MAX_RETRIES")
    # "native": tools go to the endpoint as `tools`; "text": a ReAct prompt with
    # Thought/Action/Action Input lines and a stop at "Observation:" (graphs/text_mode.py).
    agent_tool_calling: Literal["native", "text"] = Field(
        "native", description="how the model calls tools"
    )

    # The context budget (graphs/context.py, graphs/window.py).
    agent_context_tokens: int | None = Field(
        None, ge=256, description="the model's context window; unset: asked of the server"
    )
    openai_max_tokens: int | None = Field(
        None, ge=1, description="cap on one reply; unset: min(4096, window / 4)"
    )
    agent_history_summary: bool = Field(
        True, description="fold the turns that no longer fit into a running summary"
    )

    # The four guards of the tools loop.
    agent_max_steps: int = Field(12, ge=1, description="model turns per run")
    agent_max_calls_per_tool: int = Field(6, ge=1, description="calls of one tool per run")
    agent_tool_timeout_s: float = Field(
        30.0, gt=0, validation_alias=AliasChoices("AGENT_TOOL_TIMEOUT", "AGENT_TOOL_TIMEOUT_S")
    )

    @field_validator("agent_context_tokens", "openai_max_tokens", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # `AGENT_CONTEXT_TOKENS=` (as .env.example shows it) means unset, not a bad number.
        return None if isinstance(value, str) and not value.strip() else value
