"""The one FilterSet for jobs, shared by the htmx list and the API list."""

import django_filters

from quotas.models import GpuFlavor
from tenants.scoping import TeamFilterSet

from .lifecycle import State
from .models import Job


class JobFilter(TeamFilterSet):
    # ``team``: the scoped base's, among the teams the request may see.
    # A job has one state: no DISTINCT needed (it would make the database sort every match).
    state = django_filters.MultipleChoiceFilter(choices=State.choices, distinct=False)
    kind = django_filters.ChoiceFilter(choices=Job.Kind.choices)
    flavor = django_filters.ModelChoiceFilter(to_field_name="name", queryset=GpuFlavor.objects.all())
    # A plain name match on jobs the caller can already see: an unknown name and someone
    # else's both give an empty list, so the filter does not tell who has an account.
    submitter = django_filters.CharFilter(field_name="submitter__username", label="Submitter")
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name contains")

    class Meta:
        model = Job
        fields = ["team", "state", "kind", "flavor", "submitter", "q"]
