"""A project's redaction policy (core/redaction.py does the finding): setting it, and what it finds in the project's
recent episodes, by kind, with examples a manager checks for wrong hits; their marks (a wrong hit, a miss) give
each kind's precision and recall.

Setting the policy needs a manager; switching redaction off, or keeping originals apart, needs an admin and a reason
(steps stored later then hold personal data, or their originals are kept), and every change is audited with what
the policy does (never its word list)."""
from __future__ import annotations

from collections import Counter

from django.db import transaction

from annotation.models import RedactionMark, RedactionVerdict
from core import redaction
from core.audit import audit_record
from core.errors import ApplicationError
from rollouts.models import Episode, Step
from projects.models import Project, Role

RECENT_EPISODES = 50
EXAMPLES_PER_KIND = 3
CONTEXT_CHARS = 40


@transaction.atomic
def redaction_policy_set(*, project: Project, actor, role: str, settings: dict, reason: str = "") -> dict:
    """Store the project's policy (``settings``, checked by core.redaction.policy_clean); returns it as stored."""
    cleaned = redaction.policy_clean(settings)
    reason = (reason or "").strip()
    current = redaction.policy_of(project.settings)
    for risky, said in ((not cleaned["enabled"], "switch redaction off: steps would then be stored, reviewed and "
                                                 "exported with personal data"),
                        (cleaned["enabled"] and cleaned["keep_originals"] and not current.keep_originals,
                         "keep originals: what redaction hides would then be stored apart, for admins")):
        if not risky:
            continue
        if role != Role.ADMIN:
            raise ApplicationError(f"Only a project admin can {said}. Ask an admin of this project.", status=403)
        if not reason:
            raise ApplicationError(f"Say why you {said.split(':')[0]} (the reason is kept in the audit log).",
                                   errors={"reason": ["Required for this change."]})
    locked = Project.objects.select_for_update().get(pk=project.pk)
    locked.settings = {**(locked.settings or {}), "redaction": cleaned}
    locked.save(update_fields=["settings"])
    record = redaction.snapshot_record(locked.settings)
    audit_record(actor=actor, action="redaction.policy_set", target=locked,
                 data={**record, "keep_originals": cleaned["keep_originals"], "reason": reason[:500]})
    project.settings = locked.settings
    return cleaned


def _step_texts(step: dict) -> list[tuple[str, str]]:
    """(field, text) of each text a step stores that redaction looks at."""
    texts = [("url", step["url"]), ("screen_text", step["screen_text"]), ("thought", step["thought"]),
             ("action", step["action_text"]), ("spoken", step["human_thought"])]
    texts += [("element", element.get("text") or "") for element in step["elements"] or []]
    return [(field, text) for field, text in texts if text]


def _found(text: str, policy) -> list[tuple[redaction.Hit, bool]]:
    """What the policy finds in a stored text: the labels of what was hidden when it was stored (hidden), and what
    it would hide now (a step stored under another policy, or before redaction at store time)."""
    found = [(hit, False) for hit in redaction.hits(text, policy)]
    for match in policy.labels.finditer(text) if policy.enabled else ():
        kind = match.group(0)[1:-1].lower()
        if kind != "cut":
            found.append((redaction.Hit(kind, match.start(), match.end(), match.group(0)), True))
    return sorted(found, key=lambda pair: pair[0].start)


def redaction_overview(*, project: Project, episodes: int = RECENT_EPISODES) -> dict:
    """The policy, and what it finds in the project's ``episodes`` most recent episodes: hits by kind and by where
    they were (element text, URL, typed action, thought, spoken words), and a few examples of each kind in their
    context, to check for wrong hits (steps are stored redacted: an example of a hidden value shows its label in
    its context)."""
    policy = redaction.policy_of(project.settings)
    recent = list(Episode.objects.filter(project=project).order_by("-id").values_list("id", flat=True)[:episodes])
    steps = (Step.objects.filter(episode_id__in=recent).order_by("-episode_id", "index")
             .values("episode_id", "index", "url", "screen_text", "thought", "action_text", "human_thought", "elements"))
    by_kind: Counter = Counter()
    by_field: dict[str, Counter] = {}
    examples: dict[str, list[dict]] = {}
    marks = list(RedactionMark.objects.filter(project=project).values_list("kind", "verdict", "text"))
    wrong_texts = {(kind, text.lower()) for kind, verdict, text in marks if verdict == RedactionVerdict.WRONG_HIT}
    wrong: Counter = Counter()
    missed = Counter(kind for kind, verdict, _ in marks if verdict == RedactionVerdict.MISSED)
    for step in steps.iterator(chunk_size=500):
        for field, text in _step_texts(step):
            for hit, hidden in _found(text, policy):
                before = text[max(0, hit.start - CONTEXT_CHARS):hit.start]
                after = text[hit.end:hit.end + CONTEXT_CHARS]
                # a value hidden when stored is judged by its context: a wrong-hit mark names the label in it
                key = (before + hit.value + after if hidden else hit.value).strip().lower()
                by_kind[hit.kind] += 1
                wrong[hit.kind] += (hit.kind, key) in wrong_texts
                by_field.setdefault(hit.kind, Counter())[field] += 1
                shown = examples.setdefault(hit.kind, [])
                if len(shown) < EXAMPLES_PER_KIND:
                    shown.append({"episode": step["episode_id"], "step": step["index"], "field": field,
                                  "before": before, "match": hit.value, "after": after, "hidden": hidden})
    counts = []
    for kind in [k for k, _ in by_kind.most_common()] + sorted(set(missed) - set(by_kind)):
        n, right = by_kind[kind], by_kind[kind] - wrong[kind]
        counts.append({"kind": kind, "hits": n, "where": dict(by_field.get(kind, {})),
                       "examples": examples.get(kind, []), "wrong_hits": wrong[kind], "missed": missed[kind],
                       "precision": round(right / n, 4) if n else None,
                       "recall": round(right / (right + missed[kind]), 4) if right + missed[kind] else None})
    return {"policy": policy.to_dict(), "digest": policy.digest, "kinds": list(redaction.KINDS),
            "episodes": len(recent), "counts": counts}


def redaction_mark_add(*, project: Project, reviewer, kind: str, verdict: str, text: str,
                       episode_id: int | None = None, step_index: int | None = None) -> RedactionMark:
    """A reviewer's mark: ``text`` was hidden as ``kind`` and is not personal data (a wrong hit), or is personal data
    of ``kind`` that was left as it was (a miss). The same mark twice is one."""
    if verdict not in RedactionVerdict.values:
        raise ApplicationError(f"A mark is one of: {', '.join(RedactionVerdict.values)}.")
    if not (isinstance(kind, str) and kind.strip()) or len(kind) > 32:
        raise ApplicationError("Say which kind of personal data the mark is about (email, phone, name, ...).")
    text = (text or "").strip()
    if not text or len(text) > 300:
        raise ApplicationError("Give the text that was wrongly hidden, or that should have been (at most 300 "
                               "characters).")
    if episode_id is not None and not Episode.objects.filter(pk=episode_id, project=project).exists():
        raise ApplicationError("That episode is not one of this project's.", status=404)
    mark, _ = RedactionMark.objects.get_or_create(
        project=project, kind=kind.strip(), verdict=verdict, text=text,
        defaults={"reviewer": reviewer, "episode_id": episode_id, "step_index": step_index})
    return mark
