"""The audit trail: who changed what and when, with before and after values.

django-simple-history keeps a history table per model (teams, memberships, flavors,
quotas, grants and requests); this module reads them for the console.
"""

from dataclasses import dataclass
from itertools import pairwise

from django.http import Http404

from tenants.models import Membership, Team

from .models import Drain, GpuFlavor, Quota, QuotaGrant, QuotaRequest

# URL key -> model; the keys appear in /console/history/<key>/<pk>/.
TRACKED = {
    "team": Team,
    "membership": Membership,
    "flavor": GpuFlavor,
    "quota": Quota,
    "grant": QuotaGrant,
    "request": QuotaRequest,
    "drain": Drain,
}
KEY_OF = {model: key for key, model in TRACKED.items()}
ACTIONS = {"+": "created", "~": "changed", "-": "deleted"}


@dataclass
class Entry:
    key: str
    record: object
    changes: list

    @property
    def action(self) -> str:
        return ACTIONS.get(self.record.history_type, self.record.history_type)

    @property
    def who(self) -> str:
        user = self.record.history_user
        return user.get_username() if user else "the platform"

    @property
    def object_id(self):
        return self.record.id


def _shown(field, value):
    """A related object by its name rather than its id."""
    if value is None or field is None or not field.is_relation:
        return value
    related = field.related_model._default_manager.filter(pk=value).first()
    return related if related is not None else f"#{value} (deleted)"


def _changes(record, previous) -> list[tuple[str, object, object]]:
    if previous is None:
        return []
    delta = record.diff_against(previous)
    opts = record.instance_type._meta
    rows = []
    for change in delta.changes:
        try:
            field = opts.get_field(change.field)
        except Exception:  # a field since removed from the model
            field = None
        label = field.verbose_name if field is not None else change.field
        rows.append((str(label), _shown(field, change.old), _shown(field, change.new)))
    return rows


def _worth_showing(entry: "Entry") -> bool:
    # A save that changed nothing (an idempotent seed, a form saved as it was) is noise.
    return entry.record.history_type != "~" or bool(entry.changes)


def model_for(key: str):
    try:
        return TRACKED[key]
    except KeyError:
        raise Http404("No history is kept for that kind of object.") from None


def object_history(key: str, pk: int) -> list[Entry]:
    """Every change of one object, newest first, each with its differences from the one before."""
    model = model_for(key)
    records = list(model.history.filter(id=pk).select_related("history_user").order_by("history_date", "history_id"))
    entries = [Entry(key, records[0], [])] if records else []
    entries += [Entry(key, new, _changes(new, old)) for old, new in pairwise(records)]
    return [e for e in entries if _worth_showing(e)][::-1]


def recent(limit: int = 50, key: str | None = None) -> list[Entry]:
    """The latest changes across the tracked models (or one of them), newest first."""
    models = [model_for(key)] if key else list(TRACKED.values())
    records = []
    for model in models:
        records += [(KEY_OF[model], r) for r in model.history.select_related("history_user").order_by("-history_date")[:limit * 2]]
    records.sort(key=lambda item: item[1].history_date, reverse=True)
    entries = []
    for k, r in records:
        entry = Entry(k, r, _changes(r, r.prev_record) if r.history_type == "~" else [])
        if _worth_showing(entry):
            entries.append(entry)
            if len(entries) == limit:
                break
    return entries
