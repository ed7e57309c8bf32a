from django.apps import AppConfig


class TriggersConfig(AppConfig):
    """What starts a run from outside: webhook triggers and their deliveries.

    A sibling of ``schedules`` and ``notifications``: it imports ``runs``,
    ``workflows`` and ``tools``; nothing below imports it and its siblings never
    do. One module per kind of trigger (``webhooks.py``), each calling ``run_create``.
    """

    name = "triggers"
    verbose_name = "Triggers"
    default_auto_field = "django.db.models.BigAutoField"
