"""The API's filter backend: django-filter's, skipped when a request filters nothing.

Building a FilterSet and its form costs a list request a few milliseconds even when no
query parameter names a filter (most CI polls and every first page); then the queryset is
returned as it is, which is what the FilterSet would have done.

An empty value for a filter with choices (``?state=``) is a 400 on that filter: the schema
lists the choices, and "" is none of them (django-filter would quietly not filter).
"""

import django_filters
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema_field
from rest_framework import exceptions

CHOICE_FILTERS = (django_filters.ChoiceFilter, django_filters.MultipleChoiceFilter, django_filters.TypedChoiceFilter)


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
        empty = sorted(name for name, filter_ in filterset_class.base_filters.items()
                       if isinstance(filter_, CHOICE_FILTERS) and name in params and "" in params.getlist(name))
        if empty:
            raise exceptions.ValidationError({name: ["Give one of the choices, or leave the filter out."]
                                              for name in empty})
        return super().filter_queryset(request, queryset, view)
