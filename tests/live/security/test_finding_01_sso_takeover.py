"""Issue 29, finding 1: an IdP account whose email claim matched an existing local account
took it over at its first SSO sign-in, even with ``email_verified=false`` (a researcher's
and a quota manager's account). Now an account made before SSO is linked only on a
verified address and as ``OIDC_LINK_EXISTING_ACCOUNTS`` allows, never a privileged one, and
the link is in the audit trail; otherwise the sign-in makes a new account with a free name.
Against the real IdP (Ory Hydra, deploy/local-idp)."""

import pytest
from django.test import Client

from tenants.models import Membership
from tenants.models.identities import OidcIdentity

from ...builders import make_team, make_user
from ...support.sso import CALLBACK, signed_in_user, start

pytestmark = [pytest.mark.idp, pytest.mark.django_db]


def sign_in_as(client, idp, *, subject="mallory-sub", **claims):
    """The whole code flow for ``subject``, the ID token carrying exactly ``claims``."""
    callback = idp.follow(start(client), subject, claims, until=CALLBACK)
    return client.get(callback.removeprefix("http://testserver"))


def local_account(username, email, **kwargs):
    user = make_user(username, **kwargs)
    user.email = email
    user.save(update_fields=["email"])
    return user


def test_finding_01_an_unverified_email_does_not_take_over_a_researchers_account(sso):
    researcher = local_account("alovelace", "ada@example.org")
    make_team("vision", members={researcher: Membership.Role.OWNER})
    client = Client()
    response = sign_in_as(client, sso, email="ada@example.org", email_verified=False, preferred_username="ada")
    assert response.status_code == 302
    newcomer = signed_in_user(client)
    assert newcomer != researcher and newcomer.username == "ada"
    assert not OidcIdentity.objects.filter(user=researcher).exists()
    assert not newcomer.memberships.exists()


def test_finding_01_an_email_without_a_verified_claim_does_not_link_either(sso):
    researcher = local_account("alovelace", "ada@example.org")
    client = Client()
    sign_in_as(client, sso, email="ADA@example.org", preferred_username="ada")
    assert signed_in_user(client) != researcher


def test_finding_01_a_quota_managers_account_is_never_linked_even_on_a_verified_email(sso):
    manager = local_account("quinn", "quinn@example.org", quota_manager=True)
    client = Client()
    sign_in_as(client, sso, email="quinn@example.org", email_verified=True, preferred_username="quinn")
    newcomer = signed_in_user(client)
    assert newcomer != manager
    assert newcomer.username == "quinn-2"  # the local name is taken: a free one, never the account
    assert not newcomer.is_staff and not newcomer.groups.exists()


def test_finding_01_a_verified_email_links_once_and_the_audit_trail_says_so(sso):
    researcher = local_account("alovelace", "ada@example.org")
    client = Client()
    sign_in_as(client, sso, subject="ada-sub", email="ada@example.org", email_verified=True)
    assert signed_in_user(client) == researcher
    [record] = OidcIdentity.history.filter(user=researcher)
    assert record.history_change_reason == \
        "linked to the existing account alovelace by the verified email ada@example.org"
    # A second IdP account with the same address gets an account of its own.
    other = Client()
    sign_in_as(other, sso, subject="impostor-sub", email="ada@example.org", email_verified=True)
    assert signed_in_user(other) not in (None, researcher)


def test_finding_01_with_linking_off_a_verified_email_makes_a_new_account(sso, settings):
    settings.OIDC_LINK_EXISTING_ACCOUNTS = "never"
    researcher = local_account("alovelace", "ada@example.org")
    client = Client()
    sign_in_as(client, sso, email="ada@example.org", email_verified=True, preferred_username="alovelace")
    newcomer = signed_in_user(client)
    assert newcomer != researcher and newcomer.username == "alovelace-2"
    assert OidcIdentity.history.get(user=newcomer).history_change_reason.startswith("new account alovelace-2")
