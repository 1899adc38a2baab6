"""Forms of the token page and the group-mapping page."""

from datetime import timedelta

from django import forms

from tenants.models import Team
from tenants.models.identities import GroupMapping
from tenants.tokens import ApiToken, Scope, unusable_scopes_message, usable_scopes


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'CI of repo x'.")
    team = forms.ModelChoiceField(queryset=Team.objects.none(), to_field_name="slug",
                                  help_text="The one team the token acts for.")
    scopes = forms.MultipleChoiceField(choices=Scope.choices, widget=forms.CheckboxSelectMultiple,
                                       help_text="Submit and cancel only where you are an owner or member.")
    expires_in_days = forms.IntegerField(min_value=1, max_value=365, initial=90,
                                         help_text="Between 1 and 365 days.")

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["team"].queryset = Team.objects.visible_to(user)
        # Only the scopes the person can use somewhere are offered (a viewer's token reads).
        usable = usable_scopes(user)
        self.fields["scopes"].choices = [(value, label) for value, label in Scope.choices if value in usable]
        self.fields["scopes"].initial = usable

    def clean(self):
        data = super().clean()
        team, scopes = data.get("team"), data.get("scopes")
        if team is not None and scopes:
            unusable = set(scopes) - set(usable_scopes(self.user, team))
            if unusable:
                self.add_error("scopes", unusable_scopes_message(self.user, team, unusable))
        return data

    def save(self):
        data = self.cleaned_data
        return ApiToken.objects.issue(user=self.user, name=data["name"], team=data["team"],
                                      scopes=sorted(data["scopes"]),
                                      lifetime=timedelta(days=data["expires_in_days"]))


class GroupMappingForm(forms.ModelForm):
    class Meta:
        model = GroupMapping
        fields = ["group", "role", "team"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = Team.objects.exclude(status=Team.Status.DELETING)

    def clean(self):
        cleaned = super().clean()
        role, team = cleaned.get("role"), cleaned.get("team")
        if role == GroupMapping.Role.QUOTA_MANAGER and team is not None:
            self.add_error("team", "The quota-manager role is platform-wide: leave the team empty.")
        elif role and role != GroupMapping.Role.QUOTA_MANAGER and team is None:
            self.add_error("team", "Pick the team this group gives a role in.")
        return cleaned

    def save(self, user=None):
        mapping = super().save(commit=False)
        mapping._history_user = user
        mapping.save()
        return mapping
