"""Response bodies from the domain's plain objects, in the output shapes of `serializers`.

Each serializer is compiled once, on first use, into one function that builds the body as a
hand-written dict would: DRF's own `to_representation` walks its field objects on every
call, and even a loop of `attrgetter` readers over the members cost the list of 100 services
6.2% more instructions (docs/performance.md, "The house, third pass").
A member is read by a `show_<name>` of the serializer, else from its field's `source` (an
attribute path, or a digit for a tuple's item; by default the member's name in snake case),
and converted by its field's type; a member the shape does not require is left out when
empty.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import cache
from typing import Any, cast

from rest_framework import serializers

from services.api.serializers import RevealedField
from services.masking import Secret
from services.times import rfc3339

_SNAKE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
Body = dict[str, Any]
Builder = Callable[[Any], Body]


def render(shape: type[serializers.Serializer[Any]], obj: object) -> Body:
    """`obj` (a model, a dataclass, a tuple) in the output shape `shape`."""
    return _renderer(shape)(obj)


def render_many(shape: type[serializers.Serializer[Any]], objs: Iterable[object]) -> list[Body]:
    renderer = _renderer(shape)
    return [renderer(obj) for obj in objs]


@cache
def _renderer(shape: type[serializers.Serializer[Any]]) -> Builder:
    return _compile_output(shape())


def _compile_output(serializer: serializers.Serializer[Any]) -> Builder:
    # One dict display built from source text, as dataclasses build their methods.
    names: dict[str, Any] = {}
    items = []
    for index, (name, field) in enumerate(serializer.fields.items()):
        if show := getattr(serializer, f"show_{name}", None):
            names[f"show{index}"] = show
            value = f"show{index}(obj)"
        else:
            # A member without a `source` of its own reads the attribute of its name in
            # snake case (`connectedAt`: `connected_at`).
            source = _SNAKE.sub("_", name).lower() if field.source == name else str(field.source)
            value = _read(source)
        if (convert := _conversion(field)) is not None:
            names[f"convert{index}"] = convert
            value = f"convert{index}({value})"
        items.append(f"{name!r}: {value}")
    # Only declared names in the text: member names, sources checked by `_read`.
    build: Builder = eval(f"lambda obj: {{{', '.join(items)}}}", names)  # noqa: S307
    optional = tuple(name for name, field in serializer.fields.items() if not field.required)
    if not optional:
        return build

    def rendered(obj: object) -> Body:
        body = build(obj)
        for name in optional:
            if not body[name]:
                del body[name]
        return body

    return rendered


def _read(source: str) -> str:
    if source.isdigit():
        return f"obj[{int(source)}]"
    if not all(part.isidentifier() for part in source.split(".")):
        raise ValueError(f"an output source is an attribute path or an index: {source!r}")
    return f"obj.{source}"


def _optional_time(moment: datetime | None) -> str | None:
    return rfc3339(moment) if moment else None


def _optional_text(value: object) -> str | None:
    return str(value) if value else None


def _conversion(field: serializers.Field[Any, Any, Any, Any]) -> Callable[[Any], Any] | None:
    if isinstance(field, serializers.ListSerializer):
        child = _compile_output(cast("serializers.Serializer[Any]", field.child))
        return lambda items: [child(item) for item in items]
    if isinstance(field, serializers.Serializer):
        return _compile_output(field)
    if isinstance(field, serializers.ListField):
        return list
    if isinstance(field, serializers.DateTimeField):
        # A moment that may be null, or left out (a member the shape does not require).
        return _optional_time if field.allow_null or not field.required else rfc3339
    if isinstance(field, RevealedField):
        return Secret.reveal
    if isinstance(field, serializers.CharField) and field.allow_null:
        return _optional_text  # an empty text is shown as null
    return None
