"""AuditEntry moves here from webapp: the table (webapp_auditentry) and its rows stay where they are."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("webapp", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditEntry",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("action", models.CharField(max_length=64)),
                        ("target", models.CharField(blank=True, max_length=128)),
                        ("project_id", models.BigIntegerField(blank=True, db_index=True, null=True)),
                        ("data", models.JSONField(blank=True, default=dict)),
                        ("at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        ("actor", models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL,
                                                    related_name="+", to=settings.AUTH_USER_MODEL)),
                    ],
                    options={"verbose_name_plural": "audit entries", "ordering": ["-at"],
                             "db_table": "webapp_auditentry"},
                ),
            ],
            database_operations=[],
        ),
    ]
