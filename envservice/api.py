"""The service's HTTP API: one class per operation, thin over envservice.services."""
from __future__ import annotations

import base64
import io

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.formats import FORMATS
from core.errors import ApplicationError
from envservice.leases import Lease
from envservice.services import current

IMAGE_FORMATS = ("jpeg", "png")

ObservationOutput = inline_serializer("EnvObservation", {
    "instruction": serializers.CharField(), "url": serializers.CharField(),
    "width": serializers.IntegerField(), "height": serializers.IntegerField(),
    "elements": serializers.ListField(child=serializers.DictField()),
    "screen_text": serializers.CharField(help_text="Where there is no DOM (terminal): the screen as text."),
    "image_format": serializers.ChoiceField(choices=IMAGE_FORMATS),
    "screenshot": serializers.CharField(help_text="The screenshot, base64."),
})
LeaseOutput = inline_serializer("EnvLease", {
    "lease": serializers.CharField(), "episode": serializers.IntegerField(), "kind": serializers.CharField(),
    "task": serializers.CharField(), "seed": serializers.IntegerField(), "format": serializers.CharField(),
    "run": serializers.CharField(), "index": serializers.IntegerField(help_text="The index the next step gets."),
    "done": serializers.BooleanField(), "lease_timeout_s": serializers.FloatField(),
    "observation": ObservationOutput,
})
StepOutput = inline_serializer("EnvStep", {
    "episode": serializers.IntegerField(), "index": serializers.IntegerField(), "reward": serializers.FloatField(),
    "done": serializers.BooleanField(), "info": serializers.DictField(), "timings": serializers.DictField(),
    "steps": inline_serializer("EnvTakenStep", {
        "index": serializers.IntegerField(), "actor": serializers.ChoiceField(choices=["model", "human", "edited"]),
        "action_text": serializers.CharField(), "thought": serializers.CharField(),
        "reward": serializers.FloatField(), "done": serializers.BooleanField(), "info": serializers.DictField(),
        "timings": serializers.DictField()}, many=True,
        help_text="The steps this call took: the caller's action, or, where a person took over from the live "
                  "session page, the person's actions."),
    "taken_over": serializers.BooleanField(help_text="A person acted in this call: the caller's action did not run "
                                                     "(it is stored as the overridden proposal)."),
    "observation": ObservationOutput,
})
IMAGE_PARAM = OpenApiParameter("image", str, enum=list(IMAGE_FORMATS), description="Screenshot encoding (jpeg).")


class LeaseInput(serializers.Serializer):
    project = serializers.IntegerField(help_text="The project whose task is played; the token's user must be a "
                                                 "manager there.")
    task = serializers.CharField(help_text="The task's id, or its name in the project (train split first).")
    seed = serializers.IntegerField(required=False, min_value=0, help_text="Default: the task's first seed.")
    format = serializers.ChoiceField(choices=FORMATS, default="loupe", help_text="How step actions are written.")
    run = serializers.CharField(required=False, default="", allow_blank=True, max_length=200,
                                help_text="The RL run playing: its episodes carry this name in Loupe (the episode "
                                          "list's rl_run filter).")


class ResetInput(serializers.Serializer):
    seed = serializers.IntegerField(required=False, min_value=0, help_text="Default: the lease's seed.")


class StepInput(serializers.Serializer):
    action = serializers.CharField(trim_whitespace=False, max_length=100_000,
                                   help_text="The model's answer ('Thought: ...\\nAction: click(x=1, y=2)', or the "
                                             "bare action) in the lease's format.")
    format = serializers.ChoiceField(choices=FORMATS, required=False, help_text="Overrides the lease's format.")


def _image_format(request) -> str:
    fmt = request.query_params.get("image", "jpeg")
    if fmt not in IMAGE_FORMATS:
        raise ApplicationError(f"Unknown image format '{fmt}'; use jpeg or png.", errors={"image": ["Invalid."]})
    return fmt


def observation_payload(obs, *, image: str = "jpeg") -> dict:
    data = obs.screenshot
    if image == "png" and data:
        from PIL import Image

        buffer = io.BytesIO()
        Image.open(io.BytesIO(data)).save(buffer, format="PNG")
        data = buffer.getvalue()
    return {"instruction": obs.instruction, "url": obs.url, "width": obs.width, "height": obs.height,
            "elements": [e.to_dict() for e in obs.elements], "screen_text": obs.screen_text or "",
            "image_format": image, "screenshot": base64.b64encode(data).decode("ascii")}


def lease_payload(lease: Lease, *, image: str = "jpeg") -> dict:
    return {"lease": lease.id, "episode": lease.episode_id, "kind": lease.task.env_kind,
            "task": lease.task.task_name, "seed": lease.seed, "format": lease.action_format, "run": lease.run, "index": lease.index,
            "done": lease.done, "lease_timeout_s": current().lease_timeout,
            "observation": observation_payload(lease.observation, image=image)}


def _valid(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class LeaseCreateApi(APIView):
    @extend_schema(request=LeaseInput, parameters=[IMAGE_PARAM], responses={201: LeaseOutput},
                   summary="Lease an env of the task's kind, reset to the task and seed; a new Episode starts.")
    def post(self, request):
        data = _valid(LeaseInput, request.data)
        image = _image_format(request)
        lease, timing = current().lease_open(user=request.user, project_id=data["project"], task=data["task"],
                                             seed=data.get("seed"), action_format=data["format"],
                                             run=data["run"])
        return Response({**lease_payload(lease, image=image), **timing}, status=status.HTTP_201_CREATED)


class LeaseApi(APIView):
    @extend_schema(parameters=[IMAGE_PARAM], responses={200: LeaseOutput}, summary="The lease and its current screen.")
    def get(self, request, lease_id: str):
        lease = current()._lease_of(lease_id=lease_id, user=request.user)
        return Response(lease_payload(lease, image=_image_format(request)))

    @extend_schema(responses={204: None}, summary="Release the env; an unfinished episode ends interrupted.")
    def delete(self, request, lease_id: str):
        current().lease_release(lease_id=lease_id, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class LeaseResetApi(APIView):
    @extend_schema(request=ResetInput, parameters=[IMAGE_PARAM], responses={200: LeaseOutput},
                   summary="Start a new episode on the leased env (the unfinished one ends interrupted).")
    def post(self, request, lease_id: str):
        data = _valid(ResetInput, request.data)
        image = _image_format(request)
        lease = current().lease_reset(lease_id=lease_id, user=request.user, seed=data.get("seed"))
        return Response(lease_payload(lease, image=image))


class LeaseStepApi(APIView):
    @extend_schema(request=StepInput, parameters=[IMAGE_PARAM], responses={200: StepOutput},
                   summary="Step one action; stored as the episode's next step. While a person has paused the "
                           "episode or taken it over (live session page) the call waits, and answers with the "
                           "person's steps. 400: a bad action (stored as a void turn); 409: the episode ended, or a "
                           "person rejected the action; 410: the lease expired; 502: the env crashed and was "
                           "replaced.")
    def post(self, request, lease_id: str):
        data = _valid(StepInput, request.data)
        image = _image_format(request)
        service = current()
        result = service.lease_step(lease_id=lease_id, user=request.user, action=data["action"],
                                    action_format=data.get("format"))
        lease = service._lease_of(lease_id=lease_id, user=request.user)
        return Response({"episode": lease.episode_id, **result,
                         "observation": observation_payload(lease.observation, image=image)})


class LeaseEndApi(APIView):
    @extend_schema(request=None, responses={200: inline_serializer("EnvEnd", {
        "episode": serializers.IntegerField(), "reward": serializers.FloatField(allow_null=True),
        "ended": serializers.BooleanField(help_text="False: the episode had already ended (its reward is kept).")})},
        summary="End the episode where it stands, scored by the task's own check on the screen as it is.")
    def post(self, request, lease_id: str):
        service = current()
        result = service.lease_end(lease_id=lease_id, user=request.user)
        return Response({"episode": service._lease_of(lease_id=lease_id, user=request.user).episode_id, **result})


class StatusApi(APIView):
    @extend_schema(responses={200: inline_serializer("EnvServiceStatus", {
        "host": serializers.CharField(), "lease_timeout_s": serializers.FloatField(),
        "leases": serializers.IntegerField(), "pools": serializers.ListField(child=serializers.DictField())})},
        summary="This host's pools: capacity, leased, idle (warm), crashes.")
    def get(self, request):
        return Response(current().status())
