from django.apps import AppConfig


class HealthConfig(AppConfig):
    """Is flowpilot able to work? The whole system's health check.

    A top app beside ``api``: it checks what the apps below rely on (the database,
    the broker, workers, beat, the LLM endpoint, the circuit breakers of ``tools``)
    and may import any of them; nothing imports it but the URL configuration.
    ``manage.py health``, ``/healthz`` and the staff page are its three readers.
    """

    name = "health"
    verbose_name = "Health"
