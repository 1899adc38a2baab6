"""What each integration of a kind puts in a team namespace, as the team namespaces' admission
policy (`tenants.admission`) must know it: the objects it renders, the objects their
controllers make in turn (owned by them: a batch Job's Pods, a Deployment's ReplicaSet and its
Pods, a RayJob's RayCluster), and the team queue each must name. The policy matches and admits
these and only these, lets each be owned only by what makes it, and holds each to its queue;
its general rules (the platform's labels, the hardened pod template, placement, refused kinds)
stay with it. An integration declares its fragment in `Integration.admits`.

Pure declarations: no app is imported.
"""

from dataclasses import dataclass
from enum import StrEnum

from workloads import Kind as ObjectKind
from workloads.pods import SERVICE as SERVICE_KIND


class Queue(StrEnum):
    """How an object names the team queue it waits in (the policy checks it is the team's)."""

    # Kueue's queue-name label: one of the team's LocalQueues.
    KUEUE = "kueue"
    # A Volcano Job's ``spec.queue``: one of the team's Volcano queues.
    VOLCANO = "volcano"
    # Its pod templates: Volcano's scheduler and queue annotation (a Deployment on Volcano).
    VOLCANO_PODS = "volcano-pods"


def plural(kind: str) -> str:
    """A kind's resource, as the API server spells the ones we use."""
    lower = kind.lower()
    return lower[:-1] + "ies" if lower.endswith("y") else lower + ("es" if lower.endswith("s") else "s")


@dataclass(frozen=True)
class Admitted:
    """An object in a team namespace: rendered by the platform (at the top of a fragment, with
    no owner) or made by the controller of the object above it (owned by that object)."""

    kind: ObjectKind
    # The team queue it must name, one of these (none: it names no queue, a Service or a Pod).
    queue: tuple[Queue, ...] = ()
    # What the controller acting on it makes in turn, each owned by it.
    makes: tuple["Admitted", ...] = ()
    # Made by a controller that copies our labels onto it (KubeRay, a RayJob's RayCluster);
    # other controllers' objects carry none of ours. What we render always does.
    labelled: bool = False
    # What the policy's messages call it, where its kind says too little ("Volcano Job").
    called: str = ""

    @property
    def api_version(self) -> str:
        return self.kind[0]

    @property
    def name(self) -> str:
        return self.kind[1]

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def resource(self) -> str:
        return plural(self.name)

    @property
    def words(self) -> str:
        return self.called or self.name


PODS = Admitted(("v1", "Pod"))
# A Service the platform renders (for a job's pods' names or its endpoint), or one a controller
# makes (Volcano's for its pods' host names, KubeRay's for a head).
SERVICES = Admitted(SERVICE_KIND)


def walk(fragment: tuple[Admitted, ...], owner: Admitted | None = None):
    """(object, its owner or None when rendered), depth first, in the order declared."""
    for admitted in fragment:
        yield admitted, owner
        yield from walk(admitted.makes, admitted)


def _once(items) -> list:
    return list(dict.fromkeys(items))


@dataclass(frozen=True)
class Fragments:
    """The fragments of some integrations (all of the registry's, for the policy), summed up:
    (object, its owner or None when rendered), in the registry's order."""

    objects: tuple[tuple[Admitted, Admitted | None], ...]

    @classmethod
    def of(cls, integrations) -> "Fragments":
        return cls(tuple(pair for integration in integrations for pair in walk(integration.admits)))

    def resources(self) -> dict[str, list[str]]:
        """API group -> the resources of these objects."""
        found: dict[str, set[str]] = {}
        for admitted, _ in self.objects:
            found.setdefault(admitted.group, set()).add(admitted.resource)
        return {group: sorted(names) for group, names in found.items()}

    def kinds(self) -> list[str]:
        """Their kinds, by name (a Volcano Job is a "Job" too)."""
        return sorted({admitted.name for admitted, _ in self.objects})

    def owners(self) -> dict[str, list[Admitted]]:
        """A kind made by controllers -> what may own it, in the order declared."""
        found: dict[str, list[Admitted]] = {}
        for admitted, owner in self.objects:
            if owner is not None:
                found.setdefault(admitted.name, [])
                found[admitted.name] = _once([*found[admitted.name], _bare(owner)])
        return found

    def unlabelled(self) -> list[str]:
        """The kinds some controller makes without our labels (those `made_free` aside: only
        their makers' may lack them)."""
        free = self.made_free()
        return _once(admitted.name for admitted, owner in self.objects
                     if owner is not None and not admitted.labelled and admitted.kind not in free)

    def made_free(self) -> dict[ObjectKind, list[Admitted]]:
        """A kind held to a queue where rendered that a controller also makes with no queue and
        none of our labels (a JobSet's batch Jobs: its TrainJob waits in the queue) -> those
        controllers: only an object one of them controls is let off the queue and the labels."""
        queued = {admitted.kind for admitted, _ in self.objects if admitted.queue}
        found: dict[ObjectKind, list[Admitted]] = {}
        for admitted, owner in self.objects:
            if owner is not None and admitted.kind in queued and not admitted.queue:
                found[admitted.kind] = _once([*found.get(admitted.kind, []), _bare(owner)])
        return found

    def controlled(self) -> list[str]:
        """The kinds only controllers make (never rendered): each needs a controller as owner."""
        rendered = {admitted.name for admitted, owner in self.objects if owner is None}
        return _once(admitted.name for admitted, _ in self.objects if admitted.name not in rendered)

    def queues(self) -> dict[tuple[Queue, ...], list[Admitted]]:
        """The queues an object may name (any of them) -> the objects held to those, each once."""
        alternatives: dict[ObjectKind, list[Queue]] = {}
        named: dict[ObjectKind, Admitted] = {}
        for admitted, _ in self.objects:
            if admitted.queue:
                alternatives[admitted.kind] = _once([*alternatives.get(admitted.kind, []), *admitted.queue])
                named.setdefault(admitted.kind, _bare(admitted))
        found: dict[tuple[Queue, ...], list[Admitted]] = {}
        for kind, queues in alternatives.items():
            found.setdefault(tuple(queues), []).append(named[kind])
        return found


def _bare(admitted: Admitted) -> Admitted:
    """The object alone (its kind and name), to compare and list it once."""
    return Admitted(admitted.kind, called=admitted.called)
