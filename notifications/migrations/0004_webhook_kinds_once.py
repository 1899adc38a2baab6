"""Each webhook names each kind of event once (issue 29, finding 12): kinds stored more than
once before the rule are kept once, in their first order."""

from django.db import migrations


def kinds_once(apps, schema_editor):
    Webhook = apps.get_model("notifications", "Webhook")
    for hook in Webhook.objects.only("kinds").iterator():
        if isinstance(hook.kinds, list):
            once = list(dict.fromkeys(map(str, hook.kinds)))
            if once != hook.kinds:
                Webhook.objects.filter(pk=hook.pk).update(kinds=once)


class Migration(migrations.Migration):

    dependencies = [
        ('notifications', '0003_webhook_secret_rotation'),
    ]

    operations = [
        migrations.RunPython(kinds_once, migrations.RunPython.noop),
    ]
