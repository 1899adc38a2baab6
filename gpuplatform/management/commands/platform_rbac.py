"""Print the ClusterRole rules the platform's ServiceAccount needs (gpuplatform/rbac.py)."""

import yaml
from django.core.management.base import BaseCommand

from gpuplatform.rbac import LEASE_RULES, cluster_role_rules


class Command(BaseCommand):
    help = "Print the RBAC rules the platform needs: the ClusterRole, and the Role for the watcher's Lease."

    def handle(self, *args, **options):
        self.stdout.write("# ClusterRole rules (deploy/helm/gpuplatform/templates/rbac.yaml)")
        self.stdout.write(yaml.safe_dump(cluster_role_rules(), sort_keys=False, default_flow_style=None, width=200))
        self.stdout.write("# Role rules in the platform's namespace (leader election)")
        self.stdout.write(yaml.safe_dump(LEASE_RULES, sort_keys=False, default_flow_style=None, width=200))
