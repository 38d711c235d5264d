"""Projects, their members and their tasks. Each service is keyword-only, validates, runs in one transaction and
raises ApplicationError with a message a person can act on."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from agent.envs import tasks_for
from core.audit import audit_record
from core.errors import ApplicationError
from core.limits import check_length, too_long
from projects.models import Membership, Project, Role, Split, TaskSpec
from projects.taskspec_authoring import definition_check, problems_message

User = get_user_model()


@transaction.atomic
def project_create(*, name: str, slug: str = "", description: str = "", owner=None) -> Project:
    check_length("project_name", name, field="name")
    slug = slug or slugify(name)[:64]  # the slug is made from the name, which is kept whole
    if not slug:
        raise ApplicationError("A project needs a name made of letters or digits.")
    if Project.objects.filter(slug=slug).exists():
        raise ApplicationError(f"A project with the slug '{slug}' already exists.", status=409)
    project = Project.objects.create(name=name, slug=slug, description=description)
    if owner is not None:
        Membership.objects.create(project=project, user=owner, role=Role.ADMIN)
    audit_record(actor=owner, action="project.create", target=f"project:{project.pk}", project_id=project.pk)
    return project


@transaction.atomic
def project_update(*, project: Project, actor, name: str | None = None, description: str | None = None) -> Project:
    if name is not None:
        if not name.strip():
            raise ApplicationError("The project name cannot be empty.", errors={"name": ["This field may not be blank."]})
        project.name = check_length("project_name", name.strip(), field="name")
    if description is not None:
        project.description = description
    project.save(update_fields=["name", "description"])
    audit_record(actor=actor, action="project.update", target=f"project:{project.pk}", project_id=project.pk)
    return project


@transaction.atomic
def membership_set(*, project: Project, actor, username: str, role: str) -> Membership:
    if role not in Role.values:
        raise ApplicationError(f"Unknown role '{role}'; use one of {', '.join(Role.values)}.", errors={"role": ["Invalid choice."]})
    user = User.objects.filter(username=username).first()
    if user is None:
        raise ApplicationError(f"There is no user called '{username}'.", status=404)
    membership, _ = Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    audit_record(actor=actor, action="membership.set", target=f"user:{user.pk}", project_id=project.pk, data={"role": role})
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership, actor) -> None:
    project = membership.project
    if membership.role == Role.ADMIN and not project.memberships.filter(role=Role.ADMIN).exclude(pk=membership.pk).exists():
        raise ApplicationError("This is the project's last admin; make someone else admin first.", status=409)
    audit_record(actor=actor, action="membership.remove", target=f"user:{membership.user_id}", project_id=project.pk)
    membership.delete()


def _task_problems(*, env_kind: str, task_name: str, seed_start: int, seed_end: int, split: str, max_steps: int,
                   instruction_template: str = "", authored: bool = False) -> dict[str, list[str]]:
    """Every problem of a task's fields, by field (empty: none). ``authored``: the task is defined by its JSON
    (checked by task_authoring.definition_check), not looked up."""
    errors = {}
    if split not in Split.values:
        errors["split"] = [f"Use one of {', '.join(Split.values)}."]
    if seed_end < seed_start:
        errors["seed_end"] = ["The seed range ends before it starts."]
    if not 1 <= max_steps <= 200:
        errors["max_steps"] = ["Use between 1 and 200 steps."]
    if too_long("task_instruction", instruction_template):
        errors["instruction_template"] = [too_long("task_instruction", instruction_template)]
    try:
        known = tasks_for(env_kind)
    except ValueError:
        errors["env_kind"] = [f"Unknown environment kind '{env_kind}'."]
        known = None
    if not task_name and not authored:  # an authored task is named by its definition's id
        json_too = ", or write one as JSON" if env_kind in ("desktop", "webapp") else ""
        errors["task_name"] = [f"Choose a {env_kind} task from the list{json_too}."]
    elif known is not None and not authored and task_name not in known:
        errors["task_name"] = [f"'{task_name}' is not a registered {env_kind} task."]
    return errors


def _refuse(*groups: dict[str, list[str]]) -> None:
    """Raise one ApplicationError listing every problem of ``groups`` (by field), if there is any."""
    errors: dict[str, list[str]] = {}
    for group in groups:
        for field, messages in group.items():
            errors.setdefault(field, []).extend(messages)
    if errors:
        raise ApplicationError(problems_message([m for messages in errors.values() for m in messages]), errors=errors)


def _definition_problems(**kwargs):
    """definition_check's result, or None and its problems by field."""
    try:
        return definition_check(**kwargs), {}
    except ApplicationError as exc:
        return None, exc.errors or {"definition": [exc.message]}


@transaction.atomic
def task_create(*, project: Project, actor, task_name: str = "", env_kind: str = "miniwob",
                instruction_template: str = "", seed_start: int = 0, seed_end: int = 999, split: str = Split.TRAIN, max_steps: int | None = None,
                definition: dict | None = None) -> TaskSpec:
    """A shipped task (``task_name`` from its env's registry) or an authored one (``definition``: its JSON, whose id
    names it; see task_authoring). ``max_steps`` None: the definition's own limit, else 10. A refusal lists every
    problem found, by field."""
    authored = definition is not None
    refused = {}
    if authored:
        checked, refused = _definition_problems(env_kind=env_kind, definition=definition)
        if checked is not None:
            loaded, definition = checked
            if task_name and task_name != loaded.task_id:
                message = (f"The task's name is its JSON's id, '{loaded.task_id}'; leave the name out or make them "
                           "the same.")
                raise ApplicationError(message, errors={"task_name": [message]})
            task_name, instruction_template = loaded.task_id, instruction_template or loaded.instruction
            max_steps = loaded.max_steps if max_steps is None else max_steps
    max_steps = 10 if max_steps is None else max_steps
    _refuse(refused, _task_problems(env_kind=env_kind, task_name=task_name, seed_start=seed_start, seed_end=seed_end,
                                    split=split, max_steps=max_steps, instruction_template=instruction_template,
                                    authored=authored))
    try:
        with transaction.atomic():
            task = TaskSpec.objects.create(
                project=project, env_kind=env_kind, task_name=task_name, instruction_template=instruction_template,
                seed_start=seed_start, seed_end=seed_end, split=split, max_steps=max_steps, definition=definition,
            )
    except IntegrityError:
        raise ApplicationError(f"{task_name} ({split}) is already a task of this project.", status=409)
    audit_record(actor=actor, action="task.create", target=f"task:{task.pk}", project_id=project.pk,
                 data={"authored": definition is not None})
    return task


@transaction.atomic
def task_update(*, task: TaskSpec, actor, **fields) -> TaskSpec:
    """Change a task's seeds, split, step limit or label; ``definition`` replaces an authored task's JSON (checked as
    on create; its id may change only while the task has no episodes). A refusal lists every problem, by field."""
    allowed = {"instruction_template", "seed_start", "seed_end", "split", "max_steps", "definition"}
    unknown = set(fields) - allowed
    if unknown:
        raise ApplicationError(f"These fields cannot be changed: {', '.join(sorted(unknown))}.")
    audit = {key: value for key, value in fields.items() if key != "definition"}
    refused = {}
    if "definition" in fields:
        if fields["definition"] is None:
            raise ApplicationError("A task's JSON can be replaced, not removed; add the shipped task instead.",
                                   errors={"definition": ["This field may not be null."]})
        checked, refused = _definition_problems(env_kind=task.env_kind, definition=fields["definition"])
        if checked is None:
            del fields["definition"]  # the rest is still checked, so that every problem is listed at once
        else:
            loaded, fields["definition"] = checked
            if loaded.task_id != task.task_name:
                if task.episodes.exists():
                    message = (f"This task has episodes, so its id stays '{task.task_name}'; add a new task for "
                               f"'{loaded.task_id}'.")
                    raise ApplicationError(message, status=409, errors={"definition": [message]})
                fields["task_name"] = loaded.task_id
            if "instruction_template" not in fields and task.instruction_template in ("", _instruction_of(task)):
                fields["instruction_template"] = loaded.instruction  # the label follows the JSON unless someone set it
            audit["definition"] = loaded.task_id
    for key, value in fields.items():
        setattr(task, key, value)
    _refuse(refused, _task_problems(env_kind=task.env_kind, task_name=task.task_name, seed_start=task.seed_start,
                                    seed_end=task.seed_end, split=task.split, max_steps=task.max_steps,
                                    instruction_template=task.instruction_template,
                                    authored=task.definition is not None))
    try:
        with transaction.atomic():
            task.save()
    except IntegrityError:
        raise ApplicationError(f"{task.task_name} ({task.split}) is already a task of this project.", status=409)
    audit_record(actor=actor, action="task.update", target=f"task:{task.pk}", project_id=task.project_id, data=audit)
    return task


def _instruction_of(task: TaskSpec) -> str:
    """The instruction of the task's stored JSON, "" for a shipped task."""
    definition = task.definition if isinstance(task.definition, dict) else {}
    return str(definition.get("instruction") or definition.get("intent") or "")


@transaction.atomic
def task_delete(*, task: TaskSpec, actor) -> None:
    if task.episodes.exists():
        raise ApplicationError("This task has episodes; it cannot be deleted (their data would lose its task).", status=409)
    audit_record(actor=actor, action="task.delete", target=f"task:{task.pk}", project_id=task.project_id)
    task.delete()
