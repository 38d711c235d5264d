"""Copy the step labels of existing reviews onto their episodes' review summaries (``review_summary["step_labels"]``,
as annotation.reviews.episode_summary_refresh now writes them), so the PRM export (flywheel.datasets) sees labels
given before it existed. Reversible: going back leaves the extra key, which nothing older reads."""
from django.db import migrations


def copy_step_labels(apps, schema_editor):
    Review = apps.get_model("annotation", "Review")
    Episode = apps.get_model("flywheel", "Episode")
    by_episode: dict[int, list[dict]] = {}
    reviews = (Review.objects.exclude(step_labels={}).order_by("episode_id", "reviewer_id")
               .values_list("episode_id", "verdict", "step_labels", "reviewer__username"))
    for episode_id, verdict, labels, username in reviews.iterator(chunk_size=2000):
        if labels:
            by_episode.setdefault(episode_id, []).append({"reviewer": username, "verdict": verdict, "labels": labels})
    for episode in Episode.objects.filter(pk__in=list(by_episode)).only("pk", "review_summary"):
        summary = {**(episode.review_summary or {}), "step_labels": by_episode[episode.pk]}
        Episode.objects.filter(pk=episode.pk).update(review_summary=summary)


class Migration(migrations.Migration):
    dependencies = [("annotation", "0002_review_queues"), ("flywheel", "0015_snapshot_kind_prm")]
    operations = [migrations.RunPython(copy_step_labels, migrations.RunPython.noop)]
