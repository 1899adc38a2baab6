"""cluster.prometheus against a real HTTP server speaking Prometheus's API (cluster/prometheus_standin.py, tests/standin.py):
answers read into samples and series, credentials sent as configured, and every way of not
getting an answer turned into one PrometheusUnavailable with a line a page can show."""

import math
import socket
import time
from datetime import UTC, datetime, timedelta

import pytest
import requests

from cluster.prometheus import (
    NOT_CONFIGURED,
    Prometheus,
    PrometheusUnavailable,
    Sample,
    configured_prometheus,
    prometheus_from_settings,
    timeout_text,
)
from cluster.prometheus_standin import duration_seconds
from jobs.use import gpu_use

# The client's timeout where the test is not about time: the stand-in answers at once, but a
# loaded machine (make test runs three pytests and a build) may take seconds to let it.
PATIENT = 30


def test_query_reads_an_instant_vector_into_samples(prometheus_api):
    prometheus_api.add(42.0, __name__="DCGM_FI_DEV_GPU_UTIL", gpu="0", pod="a-1-0-xxxxx")
    prometheus_api.add(7.0, __name__="DCGM_FI_DEV_GPU_UTIL", gpu="1", pod="b-2-0-xxxxx")
    samples = Prometheus(prometheus_api.url, timeout=PATIENT).query('{__name__="DCGM_FI_DEV_GPU_UTIL",pod=~"a-.*"}')
    assert samples == [Sample({"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "pod": "a-1-0-xxxxx"}, 42.0)]


def test_query_sends_the_time_asked_for_and_its_own_timeout(prometheus_api):
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    Prometheus(prometheus_api.url, timeout=3).query('{__name__="up"}', at=at)
    path, form = prometheus_api.requests[0]
    assert path == "/api/v1/query"
    assert float(form["time"]) == at.timestamp()
    assert form["timeout"] == "3000ms"


def test_a_fractional_timeout_is_sent_in_milliseconds_and_answered(prometheus_api):
    prometheus_api.add(1.0, __name__="x")
    [sample] = Prometheus(prometheus_api.url, timeout=1.5).query('{__name__="x"}')
    assert sample.value == 1.0 and prometheus_api.requests[0][1]["timeout"] == "1500ms"
    assert timeout_text(0.0001) == "1ms"  # never "0ms", which Prometheus refuses


@pytest.mark.parametrize(("sent", "seconds"), [
    ("1.5", 1.5), ("2", 2.0), ("1500ms", 1.5), ("1m30s", 90.0), ("1h", 3600.0),
    ("1.5s", None), ("30s1m", None), ("1s1s", None), ("ms", None), ("1.5ms", None),
])
def test_the_stand_ins_read_a_duration_as_prometheus_does(sent, seconds):
    # web/api/v1's parseDuration: seconds as a number, or model.ParseDuration's units,
    # largest first and each once.
    assert duration_seconds(sent) == seconds


@pytest.mark.parametrize("refused", ["1.5s", "0ms", "0", "-1"])
def test_the_stand_in_refuses_a_timeout_prometheus_refuses(prometheus_api, refused):
    answer = requests.post(prometheus_api.url + "/api/v1/query", data={"query": '{__name__="x"}', "timeout": refused},
                           timeout=5)
    assert answer.status_code == 400 and answer.json()["errorType"] == "bad_data"
    assert '"timeout"' in answer.json()["error"]


def test_a_page_waits_a_fraction_of_a_second_and_prometheus_is_told_so(settings, standin):
    settings.PROMETHEUS_TIMEOUT_SECONDS = 2
    prometheus_from_settings.cache_clear()
    gpu_use._with_timeout.cache_clear()
    standin.add(3.0, __name__="x")
    prometheus = gpu_use.for_pages()
    assert prometheus.timeout == gpu_use.PAGE_SECONDS == 1.5
    [sample] = prometheus.query('{__name__="x"}')  # the stand-in refuses what Prometheus refuses
    assert sample.value == 3.0


def test_not_a_number_comes_back_as_nan(prometheus_api):
    prometheus_api.add(float("nan"), __name__="x")
    [sample] = Prometheus(prometheus_api.url, timeout=PATIENT).query('{__name__="x"}')
    assert math.isnan(sample.value)


def test_query_range_reads_each_series_points_in_order(prometheus_api):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    prometheus_api.add(lambda t: t - start.timestamp(), __name__="x", gpu="0")
    [series] = Prometheus(prometheus_api.url, timeout=PATIENT).query_range(
        '{__name__="x"}', start, start + timedelta(seconds=20), timedelta(seconds=10))
    assert series.labels == {"__name__": "x", "gpu": "0"}
    assert series.points == [(start.timestamp() + s, float(s)) for s in (0, 10, 20)]
    assert prometheus_api.requests[0][1]["step"] == "10"


def test_a_naive_datetime_is_refused_before_asking():
    with pytest.raises(ValueError, match="naive"):
        Prometheus("http://127.0.0.1:9").query("{}", at=datetime(2026, 1, 1))


def test_a_bearer_token_is_sent(prometheus_api):
    Prometheus(prometheus_api.url, token="s3cret", timeout=PATIENT).query('{__name__="x"}')
    assert prometheus_api.auth_seen == ["Bearer s3cret"]


def test_basic_auth_is_sent(prometheus_api):
    Prometheus(prometheus_api.url, username="grafana", password="pw", timeout=PATIENT).query('{__name__="x"}')
    assert prometheus_api.auth_seen == ["Basic Z3JhZmFuYTpwdw=="]


def test_no_credentials_unless_configured(prometheus_api):
    Prometheus(prometheus_api.url, timeout=PATIENT).query('{__name__="x"}')
    assert prometheus_api.auth_seen == [None]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_is_unreachable():
    port = _closed_port()
    with pytest.raises(PrometheusUnavailable) as raised:
        Prometheus(f"http://127.0.0.1:{port}").query('{__name__="x"}')
    assert raised.value.reason == f"Prometheus at http://127.0.0.1:{port} cannot be reached."


def test_a_server_that_does_not_answer_in_time_is_slow(prometheus_api):
    prometheus_api.delay = 5
    began = time.monotonic()
    with pytest.raises(PrometheusUnavailable, match=r"did not answer within 1 s\.$"):
        Prometheus(prometheus_api.url, timeout=1).query('{__name__="x"}')
    assert time.monotonic() - began < 4  # gave up on its own, not when the server answered


def test_a_server_that_drips_its_answer_is_cut_off_at_the_deadline(prometheus_api):
    prometheus_api.add(1.0, __name__="x", pod="p" * 200)
    prometheus_api.trickle = 0.05  # each byte well within the read timeout, the whole far beyond it
    began = time.monotonic()
    with pytest.raises(PrometheusUnavailable, match="did not answer within 1 s"):
        Prometheus(prometheus_api.url, timeout=1).query('{__name__="x"}')
    assert time.monotonic() - began < 4


@pytest.mark.parametrize("status, body, reason", [
    (401, b"Unauthorized", "refused the platform's credentials (HTTP 401)"),
    (403, b"{}", "refused the platform's credentials (HTTP 403)"),
    (502, b"<html>Bad Gateway</html>", "answered HTTP 502"),
    (200, b"<html>a login page</html>", "gave an answer that is not Prometheus's API"),
    (200, b'{"status": "success", "data": {"resultType": "matrix", "result": []}}', "not an instant vector"),
    (200, b'{"status": "success", "data": {"resultType": "vector", "result": [{"value": 1}]}}',
     "not Prometheus's API"),
    (400, b'{"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}',
     "refused the query (HTTP 400): parse error at char 3"),
    (503, b'{"status": "error", "errorType": "timeout", "error": "query timed out"}', "did not answer within 30 s"),
])
def test_every_bad_answer_is_unavailable_with_its_reason(prometheus_api, status, body, reason):
    prometheus_api.answer = (status, body)
    with pytest.raises(PrometheusUnavailable) as raised:
        Prometheus(prometheus_api.url, timeout=PATIENT).query('{__name__="x"}')
    assert reason in raised.value.reason
    assert raised.value.reason.startswith(f"Prometheus at {prometheus_api.url}")


def test_reasons_never_show_credentials_in_the_url():
    port = _closed_port()
    with pytest.raises(PrometheusUnavailable) as raised:
        Prometheus(f"http://user:pw@127.0.0.1:{port}/prefix").query("{}")
    assert "pw" not in raised.value.reason and "user" not in raised.value.reason


def test_unset_url_means_no_prometheus(settings):
    settings.PROMETHEUS_URL = ""
    prometheus_from_settings.cache_clear()
    assert prometheus_from_settings() is None
    with pytest.raises(PrometheusUnavailable) as raised:
        configured_prometheus()
    assert raised.value.reason == NOT_CONFIGURED


def test_settings_configure_the_one_prometheus(settings, prometheus_api):
    settings.PROMETHEUS_URL = prometheus_api.url
    settings.PROMETHEUS_TOKEN = "t"
    settings.PROMETHEUS_TIMEOUT_SECONDS = 5
    prometheus_from_settings.cache_clear()
    try:
        prometheus = configured_prometheus()
        assert prometheus is prometheus_from_settings()
        assert prometheus.timeout == 5
        prometheus.query('{__name__="x"}')
        assert prometheus_api.auth_seen == ["Bearer t"]
    finally:
        prometheus_from_settings.cache_clear()
