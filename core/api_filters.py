"""The API's filter backend: django-filter's, skipped when a request filters nothing.

Building a FilterSet and its form costs a list request a few milliseconds even when no
query parameter names a filter (most CI polls and every first page); then the queryset is
returned as it is, which is what the FilterSet would have done.

An empty value for a filter (``?state=``, ``?team=``) is a 400 on that filter, as the schema
says (``minLength: 1``, or choices "" is none of): django-filter would quietly not filter.
A parameter that is no filter is refused before (``core.api_query``).
"""

import django_filters
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema_field
from rest_framework import exceptions, filters

EMPTY_MESSAGE = "Give a value, or leave the filter out."


@extend_schema_field({"type": "string", "enum": ["true", "false"]})
class TrueFalseFilter(django_filters.TypedChoiceFilter):
    """A yes/no filter taking ``true`` or ``false`` only (django-filter's BooleanFilter
    reads ``null`` and anything else as no filter)."""

    def __init__(self, **kwargs):
        super().__init__(choices=[("true", "true"), ("false", "false")], coerce=lambda value: value == "true",
                         **kwargs)


class FilterBackend(DjangoFilterBackend):
    def filter_queryset(self, request, queryset, view):
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is None:
            return queryset
        params = request.query_params
        if not any(name in params for name in filterset_class.base_filters):
            return queryset
        empty = sorted(name for name in filterset_class.base_filters if "" in params.getlist(name))
        if empty:
            raise exceptions.ValidationError({name: [EMPTY_MESSAGE] for name in empty})
        return super().filter_queryset(request, queryset, view)


class OrderingFilter(filters.OrderingFilter):
    """DRF's ordering, on one of the fields the list names (``ordering_fields``; ``-`` first
    for descending), as the schema lists them: another field, several or none (``?ordering=``)
    is a 400 on ``ordering`` rather than, quietly, the default order."""

    def choices(self, view) -> list[str]:
        return [choice for name in view.ordering_fields for choice in (name, f"-{name}")]

    def get_ordering(self, request, queryset, view):
        given = request.query_params.getlist(self.ordering_param)
        if not given:
            return self.get_default_ordering(view)
        choices = self.choices(view)
        if len(given) != 1 or given[0] not in choices:
            raise exceptions.ValidationError({self.ordering_param: [f"One of {', '.join(choices)}, given once."]})
        return (given[0],)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"] = {"type": "string", "enum": self.choices(view)}
        return parameters
