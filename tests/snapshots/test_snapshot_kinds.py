"""The snapshot kinds' registry (snapshots/snapshot_kinds.py): every stored kind has its class, and a kind not in it is
refused naming the ones there are, before anything is read or stored."""
import pytest

from core.errors import ApplicationError
from snapshots import buckets
from snapshots import build
from snapshots.models import DatasetSnapshot, SnapshotKind
from snapshots.snapshot_kinds import KINDS, kind_of
from tests.factories import make_project, make_user

pytestmark = pytest.mark.django_db


def test_every_kind_a_snapshot_may_have_is_in_the_registry():
    assert list(KINDS) == list(SnapshotKind.values)
    assert all(kind_of(name).name == name for name in SnapshotKind.values)


@pytest.mark.parametrize("kind", ["", "SFT", "grpo", None, 3])
def test_an_unknown_kind_is_refused_naming_the_known_ones(kind):
    project = make_project()
    with pytest.raises(ApplicationError) as refused:
        buckets.bucket_episodes(project, kind)
    assert "sft, dpo, rl, ct, prm" in refused.value.message and refused.value.errors == {"kind": ["Invalid choice."]}
    with pytest.raises(ApplicationError):
        build.snapshot_create(project=project, kind=kind, actor=make_user())
    assert not DatasetSnapshot.objects.filter(project=project).exists()


def test_an_empty_bucket_says_what_makes_its_rows():
    project = make_project()
    for kind in SnapshotKind.values:
        with pytest.raises(ApplicationError) as empty:
            build.snapshot_create(project=project, kind=kind, actor=make_user())
        assert f"No {kind} rows match this filter" in empty.value.message
    assert "label steps good" in kind_of("prm").empty_message()
