"""The base of every settings model: one place that says an unknown key is an error."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A settings model: an unknown key is an error, never silently ignored."""

    model_config = ConfigDict(extra="forbid")
