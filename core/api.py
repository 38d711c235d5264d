"""Helpers every app's REST layer shares."""
from __future__ import annotations

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Unknown fields are an error, not silently dropped."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = set(data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in sorted(unknown)})
        return super().to_internal_value(data)
