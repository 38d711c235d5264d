"""Helpers every app's REST layer shares."""
from __future__ import annotations

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

from core.limits import LIMITS, too_long


class StrictSerializer(serializers.Serializer):
    """Unknown fields are an error, not silently dropped."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = set(data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in sorted(unknown)})
        return super().to_internal_value(data)


class LimitedCharField(serializers.CharField):
    """Text a person types, refused past its kind's limit (core/limits.py) with a message naming the field, its
    length and the limit; ``max_length`` carries the limit into the OpenAPI schema."""

    def __init__(self, kind: str, **kwargs):
        self.kind = kind
        super().__init__(max_length=LIMITS[kind], **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        message = too_long(self.kind, value)
        if message:  # before DRF's own max_length check, whose message says neither what nor how long
            raise serializers.ValidationError(message)
        return value


# --- shapes for the OpenAPI schema -------------------------------------------------------------------------------
# Many views answer dicts their topic modules build; these declare what those dicts hold, so the schema (and the
# frontend's types generated from it, frontend/src/api/schema.d.ts) says it. They describe answers; they never make
# them (tests/webapp/test_openapi_types.py checks real answers against them).
class OpenRecord(serializers.Serializer):
    """A JSON record with the fields declared and any others besides (its schema allows more properties): what a
    trainer's progress line or a cycle's stored decision may carry beyond what the page reads."""


class UserRef(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()


def _page_link() -> serializers.CharField:
    return serializers.CharField(allow_null=True, help_text="The URL of the next page; null on the last one.")


def keyset_page(item: type[serializers.Serializer], name: str) -> serializers.Serializer:
    """A keyset page (projects.api.paginate): ``results`` and the links to the pages after and before it."""
    return inline_serializer(name, {"results": item(many=True), "next": _page_link(),
                                    "previous": serializers.CharField(allow_null=True)})


def results_of(item: type[serializers.Serializer], name: str, *, next_link: bool = False) -> serializers.Serializer:
    """``{"results": [...]}``, with ``"next": null`` where the view sends it (the whole list is one page)."""
    fields = {"results": item(many=True)}
    if next_link:
        fields["next"] = _page_link()
    return inline_serializer(name, fields)
