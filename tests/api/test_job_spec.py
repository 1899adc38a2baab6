"""gpuctl's job file takes exactly the fields the API takes for a job: read from the
served schema (/api/schema/), as a generated client would, not from the platform's code."""

import pytest

from gpuctl.jobfile import FIELDS, JobFileError, load
from workloads import spec

pytestmark = pytest.mark.django_db


@pytest.fixture
def served_schema(client_as, member):
    return client_as(member).get("/api/schema/", {"format": "json"}).json()


def writable_job_fields(schema) -> set[str]:
    body = schema["paths"]["/api/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return set(schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]["properties"])


def test_the_job_file_fields_are_the_apis_writable_job_fields(served_schema):
    assert FIELDS == writable_job_fields(served_schema)


def test_the_apis_writable_job_fields_are_the_job_spec(served_schema):
    assert writable_job_fields(served_schema) == set(spec.NAMES)


def test_a_field_the_api_does_not_take_is_a_job_file_error_before_anything_is_sent():
    with pytest.raises(JobFileError, match="gpu_memory_mib"):
        load("team: vision\nname: x\ngpu_memory_mib: 80\n")
