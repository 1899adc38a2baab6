"""Forms of the notification pages: email preferences and a team webhook."""

from django import forms

from .models import CHOOSABLE, DEFAULT_ON, Kind, Webhook, audience


def field_name(kind: str) -> str:
    return kind.replace(".", "__")


class PreferenceForm(forms.Form):
    """One checkbox per kind of event: email me, or not."""

    def __init__(self, *args, initial_choices: dict[str, bool], **kwargs):
        super().__init__(*args, **kwargs)
        for kind in CHOOSABLE:
            default = "on" if kind in DEFAULT_ON else "off"
            self.fields[field_name(kind)] = forms.BooleanField(
                label=kind.label, required=False, initial=initial_choices[kind],
                help_text=f"For {audience(kind)}. Default: {default}.")

    def choices(self) -> dict[str, bool]:
        return {kind.value: self.cleaned_data[field_name(kind)] for kind in CHOOSABLE}


class WebhookForm(forms.ModelForm):
    kinds = forms.MultipleChoiceField(
        choices=[(k.value, f"{k.value}: {k.label}") for k in CHOOSABLE], widget=forms.CheckboxSelectMultiple,
        label="Events", help_text="Which events are sent to this URL.",
        error_messages={"required": "Choose at least one kind of event."})

    class Meta:
        model = Webhook
        fields = ["url", "kinds", "is_active"]
        labels = {"url": "URL", "is_active": "Active"}

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **kwargs)
        self.instance.team = team
        self.fields["kinds"].initial = self.instance.kinds or [Kind.JOB_SUCCEEDED, Kind.JOB_FAILED]
