"""Helpers every app's REST layer shares."""
from __future__ import annotations

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
