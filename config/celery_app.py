"""The Celery application. Settings come from Django settings under the CELERY_ namespace."""

import os
from logging.config import dictConfig

from celery import Celery
from celery.signals import setup_logging
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("flowpilot")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _config_loggers(*args, **kwargs):
    dictConfig(settings.LOGGING)
