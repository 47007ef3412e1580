"""A config (or roster, or registration) error in an operator's words, never the validator's.

What is wrong and the right form, a close known key for a misspelt one, and a YAML error at
its line and column. `ingest.config` raises them as one `ConfigError` listing every problem.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from pydantic import BaseModel

__all__ = ["format_error", "operator_message", "yaml_problem"]

# What each kind of validation failure means to an operator editing YAML, with the right form.
_OPERATOR_WORDS = {
    "missing": "is required",
    "extra_forbidden": "is not a known key",
    "int_type": "must be a whole number (e.g. 300)",
    "int_parsing": "must be a whole number (e.g. 300)",
    "int_from_float": "must be a whole number (e.g. 300)",
    "float_type": "must be a number (e.g. 0.5)",
    "float_parsing": "must be a number (e.g. 0.5)",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": 'must be text (quote it if YAML reads it as something else: "…")',
    "dict_type": "must be a mapping of keys (indented `key: value` lines, or {key: value})",
    "model_type": "must be a mapping of keys (indented `key: value` lines, or {key: value})",
    "model_attributes_type": "must be a mapping of keys (indented `key: value` lines)",
    "list_type": "must be a list (`- item` lines, or [a, b])",
    "tuple_type": "must be a list (`- item` lines, or [a, b])",
}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def operator_message(err: Mapping[str, Any]) -> str:
    """One pydantic error in an operator's words: what is wrong and the right form, never the
    validator's vocabulary ("Input should be a valid dictionary or instance of …")."""
    kind = str(err["type"])
    if kind in _OPERATOR_WORDS:
        msg = _OPERATOR_WORDS[kind]
        if kind not in ("missing", "extra_forbidden"):
            msg += f", got {_shown(err.get('input'))}"
        return msg
    msg = str(err["msg"]).removeprefix("Value error, ")
    if msg.startswith("Input should be "):  # literals and bounds: "must be 'a' or 'b', got 'c'"
        msg = msg.replace("Input should be ", "must be ", 1)
        msg += f", got {_shown(err.get('input'))}"
    return msg


def format_error(err: Any, model: type[BaseModel]) -> str:
    loc = ".".join(str(p) for p in err["loc"]) or "config"
    message = operator_message(err)
    if err["type"] == "extra_forbidden" and err["loc"]:
        *section, key = err["loc"]
        known = _known_keys(model, section)
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        if close:
            message += f"; did you mean `{close[0]}`?"
    return f"{loc}: {message}"


def _known_keys(model: type[BaseModel], section: Sequence[Any]) -> list[str]:
    """The keys the config accepts at `section` (a path of keys from the top)."""
    for name in section:
        field = model.model_fields.get(str(name))
        # `X`, or `X | None` for an optional section
        kinds = typing.get_args(field.annotation) or (field.annotation,) if field else ()
        inner = [k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel)]
        if not inner:
            return []
        model = inner[0]
    return [k for k in model.model_fields if k != "base_dir"]


def yaml_problem(e: yaml.YAMLError) -> str:
    """A YAML error as an operator reads it: what is wrong, at which line and column (the file
    is the error's source). PyYAML's own text names the stream `"<unicode string>"`."""
    if isinstance(e, yaml.MarkedYAMLError) and e.problem_mark is not None:
        mark = e.problem_mark
        what = ", ".join(p for p in (e.context, e.problem) if p)
        return f"not valid YAML: {what} (line {mark.line + 1}, column {mark.column + 1})"
    return f"not valid YAML: {e}"
