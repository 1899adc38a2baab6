"""Adding people to a team."""

from django import forms
from django.contrib.auth import get_user_model

from .models import Membership


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150, help_text="Their login name on this platform.")
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **kwargs)
        self.team = team

    def clean_username(self):
        username = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise forms.ValidationError(f"Nobody called '{username}' can log in here; check the spelling.")
        if self.team.memberships.filter(user=user).exists():
            raise forms.ValidationError(f"{username} is already in {self.team.slug}.")
        self.user = user
        return username

    def save(self) -> Membership:
        return Membership.objects.create(team=self.team, user=self.user, role=self.cleaned_data["role"])
