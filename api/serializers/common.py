"""Shapes shared by every resource: the error body."""

from rest_framework import serializers


class ErrorDetailSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="JSON path of the problem (`steps[2].tool`), or ''.")
    code = serializers.CharField()
    message = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    """Every error the API answers: a stable code, a sentence, and each problem."""

    code = serializers.CharField(help_text="Stable, machine-readable.")
    message = serializers.CharField()
    details = ErrorDetailSerializer(many=True)
