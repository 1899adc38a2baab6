"""Fair share explained (quotas/fairshare.py): the sentence on the team page and the quota
console comes from Kueue's own ClusterQueue status (weight, weightedShare, borrowed GPUs), and
names other teams only to those who may see them."""

from decimal import Decimal

import pytest

from quotas.fairshare import Member, fair_shares, member_of, sentence
from quotas.models import Cohort
from tests.builders import make_flavor, make_quota, make_team
from workloads.kueue import render_cluster_queue

A = Member("nlp", Decimal(1), 300, borrowed_gpus=6, nominal_gpus=8)
B = Member("vision", Decimal(2), 150, borrowed_gpus=6, nominal_gpus=8)


@pytest.mark.parametrize("case, team, members, said", [
    ("a team of higher weight borrowing as much goes first",
     "vision", [A, B],
     "Team vision has weight 2 and borrows 6 GPUs of h100 beyond its quota of 8: Kueue's weighted share 150 "
     "(the cohort's spare GPUs it uses, per mille, divided by its weight); that is 50 % less than team nlp's 300 "
     "(weight 1), so its jobs go first when it and team nlp both wait."),
    ("the other side of the same numbers",
     "nlp", [A, B],
     "Team nlp has weight 1 and borrows 6 GPUs of h100 beyond its quota of 8: Kueue's weighted share 300 "
     "(the cohort's spare GPUs it uses, per mille, divided by its weight); that is 100 % more than team vision's "
     "150 (weight 2), so team vision goes first when both wait, and team nlp's borrowed GPUs are the first "
     "taken back."),
    ("a team within its quota goes before any borrower",
     "vision", [A, Member("vision", Decimal(1), 0, 0, 8)],
     "Team vision has weight 1 and uses no more than its own quota of 8 GPUs on h100 (Kueue's weighted share: 0); "
     "that is 100 % less than team nlp's 300 (weight 1), so its jobs go first when it and team nlp both wait."),
    ("nobody borrows",
     "vision", [Member("nlp", Decimal(1), 0), Member("vision", Decimal(3), 0, 0, 4)],
     "Team vision has weight 3 and uses no more than its own quota of 4 GPUs on h100 (Kueue's weighted share: 0). "
     "No team of cohort labs borrows now, so spare GPUs go to whoever asks first."),
    ("between two others",
     "vision", [A, B, Member("audio", Decimal(4), 50, 1, 2)],
     "Team vision has weight 2 and borrows 6 GPUs of h100 beyond its quota of 8: Kueue's weighted share 150 "
     "(the cohort's spare GPUs it uses, per mille, divided by its weight); that is 200 % more than team audio's 50 "
     "(weight 4) and 50 % less than team nlp's 300 (weight 1), so when they all wait its jobs go after team "
     "audio's and before team nlp's."),
    ("equal shares",
     "vision", [Member("nlp", Decimal(1), 200, 2), Member("vision", Decimal(1), 200, 2)],
     "Team vision has weight 1 and borrows 2 GPUs of h100 beyond its quota of 0: Kueue's weighted share 200 "
     "(the cohort's spare GPUs it uses, per mille, divided by its weight); that is the same as team nlp's 200 "
     "(weight 1), so neither goes first by share."),
    ("a tie behind a lender",
     "vision", [Member("nlp", Decimal(1), 125, 1, 2), Member("vision", Decimal(1), 125, 1, 2),
                Member("lend", Decimal(1), 0, 0, 4)],
     "Team vision has weight 1 and borrows 1 GPU of h100 beyond its quota of 2: Kueue's weighted share 125 "
     "(the cohort's spare GPUs it uses, per mille, divided by its weight); that is more than team lend's 0 "
     "(weight 1) and the same as team nlp's 125 (weight 1), so team lend goes first when both wait; it ties "
     "with team nlp."),
    ("fair sharing off: Kueue gives no share",
     "vision", [Member("nlp", Decimal(1), None), Member("vision", Decimal(2), None)],
     "Kueue's fair sharing is off on this cluster: the spare h100 GPUs of cohort labs go to whoever asks first, "
     "and weights are not used."),
    ("alone in its cohort",
     "vision", [B],
     "Team vision is the only team of cohort labs on h100: it shares spare GPUs with no one."),
    ("no queue yet", "vision", [A], "Kueue shows no queue of team vision on h100 yet."),
])
def test_the_sentence_from_given_statuses(case, team, members, said):
    assert sentence(team, members, "labs", "h100") == said, case


def test_a_team_the_reader_may_not_see_is_another_team():
    said = sentence("vision", [A, B], "labs", "h100", named=lambda slug: slug == "vision")
    assert "nlp" not in said and "another team's 300" in said


def queue_with_status(quota, share: int | None, borrowed: int) -> dict:
    obj = render_cluster_queue(quota, quota.team.namespace_name, quota.team.slug)
    obj["status"] = {"flavorsUsage": [{"name": quota.flavor.name, "resources": [
        {"name": quota.flavor.resource_name, "total": str(quota.nominal_gpus + borrowed), "borrowed": str(borrowed)},
        {"name": "cpu", "total": "1", "borrowed": "0"}]}]}
    if share is not None:
        obj["status"]["fairSharing"] = {"weightedShare": share}
    return obj


@pytest.fixture
def cohort_of_two(db, team):
    labs, h100 = Cohort.objects.create(name="labs"), make_flavor("h100")
    nlp = make_team("nlp")
    return (make_quota(team, h100, cohort=labs, nominal_gpus=4, weight=2),
            make_quota(nlp, h100, cohort=labs, nominal_gpus=4, weight=1))


def test_a_member_is_read_from_kueues_cluster_queue(cohort_of_two):
    mine, _ = cohort_of_two
    assert member_of(queue_with_status(mine, 125, 2), "nvidia.com/gpu") == Member("vision", Decimal(2), 125, 2, 4)


def test_fair_shares_reads_the_cluster_queues_through_the_door(fake, cohort_of_two):
    mine, theirs = cohort_of_two
    fake.put(queue_with_status(mine, 125, 2)), fake.put(queue_with_status(theirs, 500, 2))
    shares, problem = fair_shares([mine.team], cluster=fake)
    assert problem == ""
    assert [(s.team, s.flavor, s.cohort) for s in shares] == [("vision", "h100", "labs")]
    assert "weighted share 125" in shares[0].text and "75 % less than team nlp's 500 (weight 1)" in shares[0].text


def test_the_team_page_explains_the_fair_share_to_the_team_and_not_to_outsiders(
        fake, cohort_of_two, owner, member, outsider, client_for):
    mine, theirs = cohort_of_two
    fake.put(queue_with_status(mine, 125, 2)), fake.put(queue_with_status(theirs, 500, 2))
    for person in (owner, member):
        page = client_for(person).get("/teams/vision/").content.decode()
        assert "Fair share in cohorts" in page
        # nlp is not one of theirs: "another team", its numbers still said
        assert "75 % less than another team&#x27;s 500" in page and "team nlp" not in page
    assert client_for(outsider).get("/teams/vision/").status_code == 404


def test_the_quota_console_names_every_team(fake, cohort_of_two, quota_manager, client_for):
    mine, theirs = cohort_of_two
    fake.put(queue_with_status(mine, 125, 2)), fake.put(queue_with_status(theirs, 500, 2))
    page = client_for(quota_manager).get("/quotas/console/").content.decode()
    assert "75 % less than team nlp&#x27;s 500 (weight 1)" in page
    assert "300 % more than team vision&#x27;s 125 (weight 2)" in page


def test_without_a_cluster_the_team_page_says_so(cohort_of_two, member, client_for, settings, tmp_path):
    settings.KUBE_IN_CLUSTER, settings.KUBECONFIG = False, str(tmp_path / "none")
    page = client_for(member).get("/teams/vision/").content.decode()
    assert "No cluster is configured, so Kueue&#x27;s fair-sharing status cannot be read." in page


def test_the_teams_api_gives_the_fair_share_in_words_and_numbers_to_the_team_only(
        fake, cohort_of_two, owner, member, outsider, quota_manager, client_for):
    mine, theirs = cohort_of_two
    fake.put(queue_with_status(mine, 125, 2)), fake.put(queue_with_status(theirs, 500, 2))
    for person in (owner, member):
        body = client_for(person).get("/api/v1/teams/vision").json()
        [share] = body["fair_share"]
        assert (share["flavor"], share["cohort"], body["fair_share_problem"]) == ("h100", "labs", "")
        assert "75 % less than another team's 500" in share["explanation"]
        # nlp is not one of theirs: its numbers, not its name
        assert sorted(share["queues"], key=lambda q: q["weighted_share"]) == [
            {"team": "vision", "weight": 2.0, "weighted_share": 125, "nominal_gpus": 4, "borrowed_gpus": 2},
            {"team": None, "weight": 1.0, "weighted_share": 500, "nominal_gpus": 4, "borrowed_gpus": 2}]
    assert client_for(outsider).get("/api/v1/teams/vision").status_code == 404
    [share] = client_for(quota_manager).get("/api/v1/teams/vision").json()["fair_share"]
    assert {q["team"] for q in share["queues"]} == {"vision", "nlp"}
    assert "team nlp's 500" in share["explanation"]


def test_without_a_cluster_the_teams_api_says_why_there_is_no_fair_share(
        cohort_of_two, member, client_for, settings, tmp_path):
    settings.KUBE_IN_CLUSTER, settings.KUBECONFIG = False, str(tmp_path / "none")
    body = client_for(member).get("/api/v1/teams/vision").json()
    assert body["fair_share"] == []
    assert body["fair_share_problem"] == "No cluster is configured, so Kueue's fair-sharing status cannot be read."
