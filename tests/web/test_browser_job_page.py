"""A researcher watching a job's page in a real browser (headless Chromium, Playwright; see
test_browser.py): pods appear, their logs follow, and polling stops at the end, all without a
click or a reload."""

import re

import pytest
from playwright.sync_api import expect

from jobs.lifecycle import State

from ..builders import make_job
from ..support.browser import log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def a_pod(job, name):
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": job.team.namespace_name, "uid": f"uid-{name}",
                     "labels": {"app.kubernetes.io/managed-by": "gpuplatform", "gpuplatform.io/job": str(job.pk)}},
        "spec": {"containers": [{"name": "main", "image": "x"}], "nodeName": "h100-0"},
        "status": {"phase": "Running", "containerStatuses": [{"name": "main", "restartCount": 0,
                                                               "state": {"running": {}}}]},
    }


def test_the_pods_panel_and_the_logs_change_without_a_click(page, world, owner, flavor, fake):
    job = make_job(world, flavor, name="resnet", submitter=owner, gpus_per_worker=4)
    for state in (State.SUBMITTED, State.QUEUED, State.ADMITTED):
        job.transition(state, reason=state.label, message=f"Now {state.label.lower()}.")
    log_in(page)
    page.goto(f"/jobs/{job.pk}/")
    pods = page.locator("#job-pods")
    pods.get_by_text("No pods for this job on the cluster yet.").wait_for()
    page.locator("#job-logs").get_by_text("This job has no pods on the cluster yet.").wait_for()

    # 1. The cluster starts a pod: the panel shows it and its logs on its own.
    name, namespace = f"resnet-{job.pk}-0-x7k2p", job.team.namespace_name
    fake.set_pod_logs(namespace, name, "epoch 1/3 step 100/4500 loss 6.5850\n", container="main")
    fake.put(a_pod(job, name))
    job.transition(State.RUNNING, reason="Running", message="All workers are running.")
    pods.get_by_text(name).wait_for()
    page.locator("#job-logs pre.logs").get_by_text("step 100/4500 loss 6.5850").wait_for()

    # 2. New lines arrive while Follow is on.
    fake.set_pod_logs(namespace, name, "epoch 1/3 step 100/4500 loss 6.5850\nepoch 1/3 step 200/4500 loss 6.2525\n",
                      container="main")
    page.locator("#job-logs pre.logs").get_by_text("step 200/4500 loss 6.2525").wait_for()
    shot(page, "job-page-following")

    # 3. The job ends: the page says so and every part of it stops polling.
    job.transition(State.SUCCEEDED, reason="Completed", message="All workers finished successfully.")
    page.get_by_text("This job has ended; the page no longer refreshes.").wait_for()
    pods.get_by_text("The job has ended; this list no longer refreshes.").wait_for()
    expect(page.locator('[hx-trigger^="every"]')).to_have_count(0)  # no string eval: the CSP forbids it
    assert re.search(r"Run time", page.locator("#job-status").inner_text())
