# The two Qwen formats named for what they are (issue 36): qwen3-relative (Qwen3-VL's 0-1000 grid) and
# qwen25-absolute (pixels of Qwen2.5-VL's resized image); qwen-relative stays a valid choice, the old name of
# qwen3-relative that stored checkpoints and steps hold (agent.formats.ALIASES). Choices only: no rows change.

from django.db import migrations, models

CHOICES = [("loupe", "loupe"), ("uitars", "uitars"), ("qwen3-relative", "qwen3-relative"),
           ("qwen25-absolute", "qwen25-absolute"), ("pyautogui", "pyautogui"), ("qwen-relative", "qwen-relative")]


class Migration(migrations.Migration):

    dependencies = [
        ("flywheel", "0022_confidence_asks_learned"),
    ]

    operations = [
        migrations.AlterField(
            model_name="checkpoint",
            name="action_format",
            field=models.CharField(choices=CHOICES, db_default="loupe", default="loupe",
                                   help_text="The format its answers are written in (agent/formats).", max_length=16),
        ),
        migrations.AlterField(
            model_name="rejection",
            name="action_format",
            field=models.CharField(choices=CHOICES, db_default="loupe", default="loupe",
                                   help_text="The format raw_output was written and read in.", max_length=16),
        ),
        migrations.AlterField(
            model_name="step",
            name="action_format",
            field=models.CharField(choices=CHOICES, db_default="loupe", default="loupe",
                                   help_text="The format raw_output was written and read in.", max_length=16),
        ),
    ]
