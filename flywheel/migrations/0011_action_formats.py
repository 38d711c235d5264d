"""Action formats (issue 19): a checkpoint says the format its answers are written in and whether it reads the
screenshots; each step and rejected proposal says the format its raw output was read in. Existing rows are
Loupe's text models: format loupe, no screenshots (database defaults too, for rows written in SQL)."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('flywheel', '0010_training_run_stages'),
    ]

    operations = [
        migrations.AddField(
            model_name='checkpoint',
            name='action_format',
            field=models.CharField(choices=[('loupe', 'loupe'), ('uitars', 'uitars'), ('qwen-relative', 'qwen-relative'), ('pyautogui', 'pyautogui')], db_default='loupe', default='loupe', help_text='The format its answers are written in (agent/formats).', max_length=16),
        ),
        migrations.AddField(
            model_name='checkpoint',
            name='reads_images',
            field=models.BooleanField(db_default=False, default=False, help_text="Its prompts carry the screenshots (a vision-language model); otherwise only the screen's text."),
        ),
        migrations.AddField(
            model_name='rejection',
            name='action_format',
            field=models.CharField(choices=[('loupe', 'loupe'), ('uitars', 'uitars'), ('qwen-relative', 'qwen-relative'), ('pyautogui', 'pyautogui')], db_default='loupe', default='loupe', help_text='The format raw_output was written and read in.', max_length=16),
        ),
        migrations.AddField(
            model_name='step',
            name='action_format',
            field=models.CharField(choices=[('loupe', 'loupe'), ('uitars', 'uitars'), ('qwen-relative', 'qwen-relative'), ('pyautogui', 'pyautogui')], db_default='loupe', default='loupe', help_text='The format raw_output was written and read in.', max_length=16),
        ),
        migrations.AlterField(
            model_name='rejection',
            name='prompt',
            field=models.JSONField(blank=True, default=list, help_text='The exact chat messages the policy saw; each screenshot it was sent is a reference to the stored file (loupe-storage:<name>, see flywheel.episodes.prompt_as_sent).'),
        ),
        migrations.AlterField(
            model_name='step',
            name='prompt',
            field=models.JSONField(blank=True, default=list, help_text='The exact chat messages the policy saw; each screenshot it was sent is a reference to the stored file (loupe-storage:<name>, see flywheel.episodes.prompt_as_sent).'),
        ),
    ]
