"""Issue 29, finding 5 (one owner could stall the worker), the chart's side rendered by real
Helm (the Helm build): the webhook sender runs apart, without a cluster token. The finding and
its fix: tests/security/test_finding_05_webhook_sender.py."""

from ...support.chart import template


def test_finding_05_the_chart_runs_the_sender_apart_without_a_cluster_token(helm):
    objects = template(helm)
    deployments = {o["metadata"]["name"].removeprefix("gp-gpuplatform-"): o["spec"]["template"]["spec"]
                   for o in objects if o["kind"] == "Deployment"}
    worker_args = " ".join(deployments["worker"]["containers"][0]["args"])
    sender = deployments["webhooks"]
    sender_args = " ".join(sender["containers"][0]["args"])
    assert "--queues celery " in worker_args and "webhooks" not in worker_args
    assert "--queues webhooks " in sender_args
    assert sender["automountServiceAccountToken"] is False

