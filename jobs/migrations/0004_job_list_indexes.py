from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0003_bounds'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='job',
            index=models.Index(fields=['team', '-id'], name='job_team_newest_first'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(fields=['team', '-created_at', '-id'], name='job_team_created_newest'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(fields=['-created_at', '-id'], name='job_created_newest'),
        ),
    ]
