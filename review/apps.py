from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """The design phase: the review admin, approvals and their validation runs.

    The top layer: it may import ``runs``, ``workflows`` and ``tools``; none of
    them imports it.
    """

    name = "review"
    verbose_name = "Review"
