"""What the layout asks of a person's teams: whether to offer a Submit button at all."""

from django import template

from tenants.models import Team

register = template.Library()
MAY_SUBMIT_FLAG = "_may_submit"  # set on a user object once known, for the rest of the request


@register.simple_tag(takes_context=True)
def may_submit(context) -> bool:
    """Whether the person may submit a job to some team (``Team.objects.submittable_by``, as
    the submit page decides), so a Submit button is offered only where it can work: not to
    viewers, nor to quota managers in no team. Asked once a request (kept on the user)."""
    user = context.get("user")
    if user is None or not user.is_authenticated:
        return False
    if not hasattr(user, MAY_SUBMIT_FLAG):
        setattr(user, MAY_SUBMIT_FLAG, Team.objects.submittable_by(user).exists())
    return getattr(user, MAY_SUBMIT_FLAG)
