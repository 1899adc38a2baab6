"""``python manage.py team_policy [--write]``: the team-workloads admission policy and its
binding (``tenants.admission.render_admission``) as kubectl-ready YAML, the file the Helm chart
installs them from (``deploy/helm/gpuplatform/files/team-workloads.yaml``).

They are the installer's to apply, never the platform's identity's (``tenants.admission``);
run ``--write`` after changing the policy, and tests/install/test_chart.py checks the file
is what this prints."""

from pathlib import Path

import yaml
from django.conf import settings
from django.core.management.base import BaseCommand

from tenants.admission import render_admission

CHART_FILE = Path("deploy") / "helm" / "gpuplatform" / "files" / "team-workloads.yaml"
HEADER = ("# The team-workloads admission policy and its binding, rendered by tenants/admission.py:\n"
          "# `python manage.py team_policy --write` writes this file; do not edit it by hand\n"
          "# (tests/install/test_chart.py fails when it differs). The chart installs it\n"
          "# (templates/team-workloads.yaml) and deploy/local-cluster/cluster.sh applies it as admin.\n")


def rendered() -> str:
    """The file's text: the header, then the two objects."""
    return HEADER + yaml.safe_dump_all(render_admission(), sort_keys=False, explicit_start=True, width=10**6)


class Command(BaseCommand):
    help = "Print the team-workloads admission policy and binding as YAML; --write updates the chart's file."

    def add_arguments(self, parser):
        parser.add_argument("--write", action="store_true", help=f"Write {CHART_FILE} instead of printing.")

    def handle(self, *args, write, **options):
        text = rendered()
        if not write:
            self.stdout.write(text, ending="")
            return
        path = Path(settings.BASE_DIR) / CHART_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.stdout.write(f"wrote {CHART_FILE}")
