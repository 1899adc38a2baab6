# Inference servers may scale on GPU utilization (KEDA) instead of CPU.

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0009_gpu_use'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='autoscale_metric',
            field=models.CharField(choices=[('cpu', 'CPU use'), ('gpu', 'GPU utilization')], default='cpu',
                                   max_length=3),
        ),
        migrations.AddField(
            model_name='job',
            name='target_gpu_utilization_percent',
            field=models.PositiveSmallIntegerField(blank=True, null=True, validators=[
                django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(100)]),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('autoscale_metric__in', ['cpu', 'gpu'])),
                                              name='job_autoscale_metric_valid',
                                              violation_error_message='An inference server scales on cpu or gpu.'),
        ),
    ]
