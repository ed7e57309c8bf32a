"""listflows: stored workflows, one line per version."""

from django.db.models import Count

from tools.commands import FlowpilotCommand
from workflows.selectors import workflow_list


class Command(FlowpilotCommand):
    help = "List stored workflows: name, version, status, steps, runs and last run status."

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="Include archived versions.")

    def handle(self, *args, **options):
        rows = workflow_list().annotate(step_count=Count("steps", distinct=True))
        if not options["all"]:
            rows = rows.exclude(status="archived")
        rows = list(rows)
        if not rows:
            self.stdout.write("no workflows stored (runflow FILE or importflow FILE stores one)")
            return
        self.stdout.write(
            f"{'NAME':<28} {'VER':>4} {'STATUS':<15} {'STEPS':>5} {'RUNS':>5} LAST RUN"
        )
        for wf in rows:
            last = wf.runs.order_by("-created_at", "-id").first()
            last_text = f"#{last.pk} {last.status}" if last else "-"
            self.stdout.write(
                f"{wf.name:<28} {wf.version:>4} {wf.status:<15} {wf.step_count:>5} "
                f"{wf.runs.count():>5} {last_text}"
            )
