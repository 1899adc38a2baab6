# Single sign-on: IdP group mappings, SSO identities, and where each membership comes from.

import django.db.models.deletion
import simple_history.models
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0005_team_max_priority_value'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='GroupMapping',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('group', models.CharField(help_text="The group's name exactly as the IdP sends it in the groups claim.", max_length=200)),
                ('role', models.CharField(choices=[('owner', 'Owner'), ('member', 'Member'), ('viewer', 'Viewer'), ('quota_manager', 'Quota manager')], default='member', max_length=20)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['group', 'team__slug'],
            },
        ),
        migrations.CreateModel(
            name='HistoricalGroupMapping',
            fields=[
                ('id', models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name='ID')),
                ('group', models.CharField(help_text="The group's name exactly as the IdP sends it in the groups claim.", max_length=200)),
                ('role', models.CharField(choices=[('owner', 'Owner'), ('member', 'Member'), ('viewer', 'Viewer'), ('quota_manager', 'Quota manager')], default='member', max_length=20)),
                ('created_at', models.DateTimeField(blank=True, editable=False)),
                ('history_id', models.AutoField(primary_key=True, serialize=False)),
                ('history_date', models.DateTimeField(db_index=True)),
                ('history_change_reason', models.CharField(max_length=100, null=True)),
                ('history_type', models.CharField(choices=[('+', 'Created'), ('~', 'Changed'), ('-', 'Deleted')], max_length=1)),
            ],
            options={
                'verbose_name': 'historical group mapping',
                'verbose_name_plural': 'historical group mappings',
                'ordering': ('-history_date', '-history_id'),
                'get_latest_by': ('history_date', 'history_id'),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name='HistoricalOidcIdentity',
            fields=[
                ('id', models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name='ID')),
                ('issuer', models.CharField(max_length=300)),
                ('subject', models.CharField(max_length=255)),
                ('cluster_username', models.CharField(blank=True, max_length=300)),
                ('groups', models.JSONField(blank=True, default=list)),
                ('quota_manager_via_idp', models.BooleanField(default=False)),
                ('history_id', models.AutoField(primary_key=True, serialize=False)),
                ('history_date', models.DateTimeField(db_index=True)),
                ('history_change_reason', models.CharField(max_length=100, null=True)),
                ('history_type', models.CharField(choices=[('+', 'Created'), ('~', 'Changed'), ('-', 'Deleted')], max_length=1)),
            ],
            options={
                'verbose_name': 'historical SSO identity',
                'verbose_name_plural': 'historical SSO identities',
                'ordering': ('-history_date', '-history_id'),
                'get_latest_by': ('history_date', 'history_id'),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name='OidcIdentity',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('issuer', models.CharField(max_length=300)),
                ('subject', models.CharField(max_length=255)),
                ('cluster_username', models.CharField(blank=True, max_length=300)),
                ('groups', models.JSONField(blank=True, default=list)),
                ('quota_manager_via_idp', models.BooleanField(default=False)),
                ('last_login_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'verbose_name': 'SSO identity',
                'verbose_name_plural': 'SSO identities',
            },
        ),
        migrations.AddField(
            model_name='historicalmembership',
            name='source',
            field=models.CharField(choices=[('manual', 'Added by hand'), ('idp', 'IdP group')], default='manual', editable=False, max_length=10),
        ),
        migrations.AddField(
            model_name='historicalmembership',
            name='via_group',
            field=models.CharField(blank=True, editable=False, help_text='The IdP group that grants this membership.', max_length=200),
        ),
        migrations.AddField(
            model_name='membership',
            name='source',
            field=models.CharField(choices=[('manual', 'Added by hand'), ('idp', 'IdP group')], default='manual', editable=False, max_length=10),
        ),
        migrations.AddField(
            model_name='membership',
            name='via_group',
            field=models.CharField(blank=True, editable=False, help_text='The IdP group that grants this membership.', max_length=200),
        ),
        migrations.AddConstraint(
            model_name='membership',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('source', 'manual'), ('via_group', '')), models.Q(('source', 'idp'), models.Q(('via_group', ''), _negated=True)), _connector='OR'), name='membership_source_valid', violation_error_message='A membership is made by hand, or from a named IdP group.'),
        ),
        migrations.AddField(
            model_name='groupmapping',
            name='team',
            field=models.ForeignKey(blank=True, help_text='Empty for the quota-manager role.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='group_mappings', to='tenants.team'),
        ),
        migrations.AddField(
            model_name='historicalgroupmapping',
            name='history_user',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='historicalgroupmapping',
            name='team',
            field=models.ForeignKey(blank=True, db_constraint=False, help_text='Empty for the quota-manager role.', null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='tenants.team'),
        ),
        migrations.AddField(
            model_name='historicaloidcidentity',
            name='history_user',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='historicaloidcidentity',
            name='user',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='oidcidentity',
            name='user',
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='oidc_identity', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddConstraint(
            model_name='groupmapping',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('role', 'quota_manager'), ('team__isnull', True)), models.Q(('role__in', ['owner', 'member', 'viewer']), ('team__isnull', False)), _connector='OR'), name='group_mapping_team_iff_team_role', violation_error_message='A team role needs a team; the quota-manager role takes none.'),
        ),
        migrations.AddConstraint(
            model_name='groupmapping',
            constraint=models.UniqueConstraint(condition=models.Q(('team__isnull', False)), fields=('group', 'team'), name='group_mapping_one_role_per_team', violation_error_message='This group already has a role in this team.'),
        ),
        migrations.AddConstraint(
            model_name='groupmapping',
            constraint=models.UniqueConstraint(condition=models.Q(('role', 'quota_manager')), fields=('group',), name='group_mapping_one_quota_manager_row', violation_error_message='This group already makes quota managers.'),
        ),
        migrations.AddConstraint(
            model_name='oidcidentity',
            constraint=models.UniqueConstraint(fields=('issuer', 'subject'), name='oidc_identity_one_per_subject', violation_error_message='This IdP account is already linked.'),
        ),
    ]
