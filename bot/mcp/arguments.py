"""A tool's arguments as strictly as its schema says, refused in the schema's own words.

The SDK validates a call's arguments laxly (pydantic's default: `true` reads as 1, `"5"` as 5,
an unknown argument is dropped) and refuses a bad one with pydantic's text, the rejected value
and a link to pydantic's site. Here each tool's argument model is the SDK's own (one
declaration: the tool function's signature) made strict and closed (`Strict.check`), its
published schema says so (`additionalProperties: false`), and a refusal names the argument
with what the schema takes: `limit: takes a whole number from 1 to 50, not 0`. A value is
never echoed whole: a long one is described by its size (`refused`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata, func_metadata
from pydantic import ConfigDict, ValidationError

__all__ = ["ECHO", "Strict", "expects", "refused", "shown"]

ECHO = 40  # characters of a given value an error repeats; a longer one is described by its size


@dataclass(frozen=True)
class Strict:
    """One tool's arguments: the SDK's model of its signature, strict and closed."""

    name: str
    metadata: FuncMetadata  # the SDK's, for its pre-parse (a list sent as a JSON string)
    model: type[ArgModelBase]
    schema: dict[str, Any]  # what `tools/list` publishes

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Strict:
        metadata = func_metadata(fn)
        base = metadata.arg_model
        config = ConfigDict(strict=True, extra="forbid")
        model: type[ArgModelBase] = type(
            base.__name__, (base,), {"model_config": config, "__module__": __name__}
        )
        return cls(fn.__name__, metadata, model, model.model_json_schema(by_alias=True))

    def check(self, arguments: Mapping[str, Any]) -> str | None:
        """Why `arguments` are refused, naming the first bad one; None when they are taken.
        They are read as the SDK reads them next (its pre-parse first), so what passes here is
        what the tool is called with."""
        try:
            self.model.model_validate(self.metadata.pre_parse_json(dict(arguments)))
        except ValidationError as e:
            return refused(self.name, self.schema, arguments, e)
        return None


def refused(
    tool: str, schema: Mapping[str, Any], given: Mapping[str, Any], error: ValidationError
) -> str:
    """`argument: what it takes, not what was given`, for the first argument `error` names."""
    first = error.errors(include_url=False)[0]
    where = first["loc"]
    name = str(where[0]) if where else ""
    properties: Mapping[str, Any] = schema.get("properties", {})
    if first["type"] == "extra_forbidden":
        takes = ", ".join(properties) or "no arguments"
        key = name if len(name) <= ECHO else f"an argument named by {len(name)} characters"
        return f"{key}: {tool} takes no such argument (it takes {takes})"
    if name not in properties:
        return f"arguments: {tool} takes {expects(schema)}"
    if first["type"] == "missing":
        return f"{name}: required: {expects(properties[name])}"
    return f"{name}: takes {expects(properties[name])}, not {shown(given.get(name))}"


def expects(schema: Mapping[str, Any], plural: bool = False) -> str:
    """What a JSON schema takes, in words: `a whole number from 1 to 50`."""
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(expects(s, plural) for s in options)
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return ("of " if plural else "one of ") + ", ".join(json.dumps(v) for v in values)
    kind = schema.get("type")
    if kind == "array":
        most = f"at most {schema['maxItems']} " if "maxItems" in schema else ""
        return f"a list of {most}{expects(schema.get('items', {}), plural=True)}"
    if kind == "string":
        words = "strings" if plural else "a string"
        if "maxLength" in schema:
            words += f" of at most {schema['maxLength']} characters"
        return words
    if kind == "integer":
        words = "whole numbers" if plural else "a whole number"
        if "minimum" in schema and "maximum" in schema:
            words += f" from {schema['minimum']} to {schema['maximum']}"
        return words
    if kind == "boolean":
        return "true or false"
    if kind == "object":
        return "an object of its arguments"
    return "values" if plural else "a value"


def shown(value: Any) -> str:
    """A given value as an error repeats it: short ones as JSON, longer ones by their size."""
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(value) <= ECHO else f"a string of {len(value)} characters"
    if isinstance(value, list | tuple):
        short = len(json.dumps(value, ensure_ascii=False, default=str)) <= ECHO
        return json.dumps(value) if short else f"a list of {len(value)} entries"
    if isinstance(value, dict):
        return "an object"
    text = json.dumps(value, default=str)
    return text if len(text) <= ECHO else f"a number of {len(text)} digits"
