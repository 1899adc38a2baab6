"""Forms of the quota console: an owner's request or renewal, a quota manager's approval or
denial, an owner's per-person cap, a quota manager's drain of a pool."""

from django import forms
from django.contrib.auth import get_user_model
from django.utils import timezone

from tenants.models import Membership

from .grants import MAX_CPU_CORES, MAX_GPUS, MAX_MEMORY_GIB
from .models import Drain, GpuFlavor, MemberCap, QuotaRequest
from .models.requests import MAX_JUSTIFICATION

DATE = forms.DateInput(attrs={"type": "date"})


class QuotaRequestForm(forms.ModelForm):
    class Meta:
        model = QuotaRequest
        fields = ["flavor", "gpus", "borrowing_limit_gpus", "starts_on", "ends_on", "justification"]
        widgets = {"starts_on": DATE, "ends_on": DATE, "justification": forms.Textarea(attrs={"rows": 3})}
        labels = {"gpus": "GPUs", "borrowing_limit_gpus": "Borrowing limit (GPUs)", "starts_on": "First day",
                  "ends_on": "Last day (included)"}

    def __init__(self, *args, team, **kwargs):
        # Ids of its own: the team page also shows the member cap form, which has a flavor too.
        super().__init__(*args, **{"auto_id": "request_%s", **kwargs})
        self.instance.team = team
        self.fields["flavor"].queryset = GpuFlavor.objects.all()
        self.fields["starts_on"].initial = timezone.localdate()

    def clean_starts_on(self):
        starts_on = self.cleaned_data["starts_on"]
        if starts_on < timezone.localdate():
            raise forms.ValidationError("The first day cannot be in the past.")
        return starts_on


class ApproveForm(forms.Form):
    """The request's numbers, changeable before approving."""

    # The bounds of QuotaGrant's fields, so a typo is a field error here, not at the grant.
    gpus = forms.IntegerField(label="GPUs", min_value=-MAX_GPUS, max_value=MAX_GPUS,
                              help_text="Added while the grant is active; negative takes GPUs away.")
    borrowing_limit_gpus = forms.IntegerField(label="Borrowing limit (GPUs)", min_value=0, max_value=MAX_GPUS,
                                              required=False)
    cpu_cores = forms.IntegerField(label="CPU cores", min_value=-MAX_CPU_CORES, max_value=MAX_CPU_CORES,
                                   help_text="Granted with the GPUs.")
    memory_gib = forms.IntegerField(label="Memory (GiB)", min_value=-MAX_MEMORY_GIB, max_value=MAX_MEMORY_GIB,
                                    help_text="Granted with the GPUs.")
    starts_on = forms.DateField(label="First day", widget=DATE)
    ends_on = forms.DateField(label="Last day (included)", widget=DATE, required=False, help_text="Empty means no end.")
    reason = forms.CharField(label="Note to the team", widget=forms.Textarea(attrs={"rows": 2}), required=False)
    non_renewable = forms.BooleanField(label="Not renewable", required=False,
                                       help_text="The team cannot ask to carry this grant on past its end.")

    def clean(self):
        data = super().clean()
        if data.get("starts_on") and data.get("ends_on") and data["ends_on"] < data["starts_on"]:
            self.add_error("ends_on", "The last day cannot be before the first day.")
        return data


class RenewalForm(forms.Form):
    """An owner's request to carry a grant on past its end: until when, and with how many
    GPUs (the grant's unless changed)."""

    ends_on = forms.DateField(label="New last day (included)", widget=DATE)
    gpus = forms.IntegerField(label="GPUs", min_value=-MAX_GPUS, max_value=MAX_GPUS,
                              help_text="The grant's number unless you ask for another.")
    justification = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=MAX_JUSTIFICATION,
                                    help_text="Why the team still needs the GPUs, so a quota manager can decide.")

    def __init__(self, *args, grant, **kwargs):
        super().__init__(*args, **kwargs)
        self.grant = grant
        self.fields["gpus"].initial = grant.gpus

    def clean_ends_on(self):
        ends_on = self.cleaned_data["ends_on"]
        if ends_on < timezone.localdate():
            raise forms.ValidationError("The new last day cannot be in the past.")
        return ends_on


class DenyForm(forms.Form):
    reason = forms.CharField(label="Reason", widget=forms.Textarea(attrs={"rows": 2}),
                             help_text="The team reads this on its page.")

    def __init__(self, *args, **kwargs):
        # Ids of its own: the request's page also shows the approve form, which has a reason too.
        super().__init__(*args, **{"auto_id": "deny_%s", **kwargs})

    def clean_reason(self):
        reason = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError("Say why, so the team knows what to change.")
        return reason


class MemberCapForm(forms.Form):
    """Set the cap of one person of the team (or the team's default) on a flavor: a new one, or
    the numbers of the one already set for them (`MemberCap.clean` holds the rules)."""

    EVERYONE = ""

    person = forms.ChoiceField(required=False, help_text="Everyone: the default for whoever has no cap of "
                               "their own, owners included.")
    flavor = forms.ModelChoiceField(queryset=GpuFlavor.objects.all(), to_field_name="name")
    max_gpus = forms.IntegerField(label="GPUs at once", min_value=0, max_value=MAX_GPUS)
    max_jobs = forms.IntegerField(label="Jobs at once", min_value=1, required=False,
                                  help_text="Empty: no limit on the number of jobs.")

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **{"auto_id": "cap_%s", **kwargs})  # beside the quota request form's flavor
        self.team = team
        people = team.memberships.filter(role__in=(Membership.Role.OWNER, Membership.Role.MEMBER)) \
            .select_related("user").order_by("user__username")
        self.fields["person"].choices = [(self.EVERYONE, "Everyone (team default)")] + [
            (m.user.username, m.user.username) for m in people]

    def cap(self) -> MemberCap:
        """The cap these numbers set, not saved (`jobs.actions.save_cap` saves it)."""
        data = self.cleaned_data
        user = get_user_model().objects.filter(username=data["person"]).first() if data["person"] else None
        cap = MemberCap.objects.filter(team=self.team, flavor=data["flavor"], user=user).first() or MemberCap(
            team=self.team, flavor=data["flavor"], user=user)
        cap.max_gpus, cap.max_jobs = data["max_gpus"], data["max_jobs"]
        return cap


DATETIME = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


class DrainForm(forms.ModelForm):
    """A quota manager drains a flavor (or some of its nodes) by a deadline (docs/drain.md)."""

    nodes = forms.CharField(required=False, label="Only these nodes",
                            help_text="Node names, separated by spaces or commas; empty: every node of the flavor.")

    class Meta:
        model = Drain
        fields = ["flavor", "nodes", "deadline", "reopens_at", "reason"]
        widgets = {"deadline": DATETIME, "reopens_at": DATETIME}
        labels = {"deadline": "Empty by", "reopens_at": "Reopens at"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("deadline", "reopens_at"):
            self.fields[name].input_formats = ["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S"]

    def clean_nodes(self):
        return [name for name in self.cleaned_data.get("nodes", "").replace(",", " ").split() if name]
