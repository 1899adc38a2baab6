"""Finding 5 (issue 29): one owner could stall the worker. The webhook sender had no overall
deadline and posted inside a database transaction (a receiver trickling one byte every
1.5 s held one attempt for 18 s against a 2 s timeout); pings were unlimited and shared the
worker with every reconcile.

Now: an attempt is cut at ``WEBHOOK_TIMEOUT_SECONDS`` whatever the receiver trickles, and
the POST holds no transaction and no row lock; attempts are rate-limited per webhook and
per team, test events and resends by hand per hour; and the sender has a Celery queue and
worker of its own.

Here the chart, rendered by real Helm (the Helm build); the rest:
tests/security/test_finding_05_webhook_sender.py."""

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

