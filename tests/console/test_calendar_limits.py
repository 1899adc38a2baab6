"""Dates at the far end of the calendar are refused in plain words, never a crash."""

import datetime

import pytest
from django.core.exceptions import ValidationError

from quotas.grants import window
from quotas.models import QuotaRequest

pytestmark = pytest.mark.django_db


def test_a_request_for_the_end_of_the_calendar_is_refused_in_plain_words(team, flavor, owner):
    with pytest.raises(ValidationError) as exc:
        QuotaRequest.objects.submit(team=team, requested_by=owner, flavor=flavor, gpus=8,
                                    starts_on=datetime.date(2027, 1, 1), ends_on=datetime.date(9999, 12, 31),
                                    justification="forever")
    assert "Pick a day before 3000" in exc.value.message_dict["ends_on"][0]


def test_a_grant_ending_on_the_last_calendar_day_has_no_end():
    assert window(datetime.date(2027, 1, 1), datetime.date.max)[1] is None
