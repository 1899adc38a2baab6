"""The Helm chart's rights and files checked without Helm: a team Role the platform writes
needs no escalate or bind, and the chart's team-workloads policy file is what the code
renders. The chart rendered by real Helm: tests/live/install/test_chart.py."""

from gpuplatform.rbac import required

from ..support.chart import CHART


def test_team_roles_can_be_written_without_escalate_or_bind():
    """The API server lets the platform write a team Role only if it holds the Role's rights."""
    from tenants.manifests import _rules

    needs = required()
    for write in (True, False):
        for rule in _rules(write):
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    assert set(rule["verbs"]) <= needs[(group, resource)], (group, resource)


# --- the team-workloads admission policy: the installer's, never the platform's -----------
def test_the_charts_team_policy_file_is_what_the_code_renders():
    from tenants.management.commands.team_policy import CHART_FILE, rendered

    assert (CHART / ".." / ".." / ".." / CHART_FILE).resolve().read_text() == rendered(), (
        f"{CHART_FILE} differs from tenants/admission.py: run `python manage.py team_policy --write`")
