"""Real servers for notification tests: an SMTP server and an HTTP receiver on loopback,
and Celery tasks run in-process once the transaction commits."""

import hashlib
import hmac
import json
import socket
import threading
from datetime import timedelta
from email import message_from_bytes, policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from notifications import tasks
from tenants.models import Membership

from ..builders import make_flavor, make_team, make_user


@pytest.fixture
def people(db):
    """Owner, member and viewer of team vision (with addresses), and an outsider."""
    owner = make_user("olivia", email="olivia@example.org")
    member = make_user("max", email="max@example.org")
    viewer = make_user("vera", email="vera@example.org")
    outsider = make_user("oscar", email="oscar@example.org")
    team = make_team("vision", members={owner: Membership.Role.OWNER, member: Membership.Role.MEMBER,
                                        viewer: Membership.Role.VIEWER})
    make_team("other-team", members={outsider: Membership.Role.OWNER})
    return {"team": team, "owner": owner, "member": member, "viewer": viewer, "outsider": outsider,
            "flavor": make_flavor("h100")}


@pytest.fixture
def inline(monkeypatch, django_capture_on_commit_callbacks):
    """Tasks sent with ``delay`` run at once; those sent for later (``countdown``) are kept
    in ``later`` for the test to run when it moves the clock."""
    state = {"later": [], "ran": []}

    for task in (tasks.send_emails, tasks.deliver_webhook):
        def delay(*args, _task=task):
            state["ran"].append((_task.name.rsplit(".", 1)[-1], *args))
            return _task.apply(args=args)

        def apply_async(args=(), countdown=None, _task=task, **options):
            if countdown:
                state["later"].append((_task, args, countdown))
                return None
            return delay(*args, _task=_task)

        monkeypatch.setattr(task, "delay", delay)
        monkeypatch.setattr(task, "apply_async", apply_async)

    def run_later():
        """Move the clock to when each kept task is due and run it."""
        due, state["later"] = state["later"], []
        for task, args, countdown in due:
            moment = timezone.now() + timedelta(seconds=countdown)
            monkeypatch.setattr(timezone, "now", lambda moment=moment: moment)
            task.apply(args=args)
        return len(due)

    state["run_later"] = run_later
    state["commit"] = lambda: django_capture_on_commit_callbacks(execute=True)
    return state


class _Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        message = message_from_bytes(envelope.content, policy=policy.default)
        message.raw = envelope.content
        self.messages.append((envelope.rcpt_tos, message))
        return "250 OK"


@pytest.fixture
def smtp(settings):
    """A real SMTP server on loopback; the platform's mailer points at it."""
    inbox = _Inbox()
    with socket.socket() as probe:  # aiosmtpd needs a port number up front
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.smtp.EmailBackend",
                                    "OPTIONS": {"host": "127.0.0.1", "port": port, "timeout": 10}}}
    yield inbox.messages
    controller.stop()


class Receiver:
    """A webhook receiver: verifies each request's signature, answers from a script."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.requests = []
        self.secret = None
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                timestamp = self.headers["X-GPUPlatform-Timestamp"]
                expected = "sha256=" + hmac.new(receiver.secret.encode(), f"{timestamp}.".encode() + body,
                                                hashlib.sha256).hexdigest()
                valid = hmac.compare_digest(expected, self.headers["X-GPUPlatform-Signature"])
                receiver.requests.append({"path": self.path, "headers": dict(self.headers),
                                          "body": json.loads(body), "valid": valid})
                code = receiver.answers.pop(0) if receiver.answers else 200
                if not valid:
                    code = 401
                self.send_response(code)
                if 300 <= code < 400:
                    self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/gpu?source=test"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings):
    """A real HTTP receiver on loopback, which the allow-list lets webhooks reach."""
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    made = []

    def make(*answers):
        made.append(Receiver(answers))
        return made[-1]

    yield make
    for server in made:
        server.close()
