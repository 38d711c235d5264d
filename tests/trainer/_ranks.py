"""What a spawned gloo rank of tests/trainer/test_distributed.py runs: kept apart from the test module so that each
process imports torch and trainer.distributed only, not the whole trainer."""

import json
import os
from pathlib import Path

import torch

from trainer import distributed


def _said(layer: torch.nn.Module) -> str:
    try:
        distributed.check_same_weights(layer)
        return "same"
    except distributed.TrainerError as exc:
        return str(exc)


def compare_weights(rank: int, port: int, folder: str) -> None:
    """A 2x3 layer of whole numbers on both ranks: check_same_weights on it as it is, then with two of rank 1's
    entries swapped (the same sum, other weights); writes what the check said each time."""
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=2)
    try:
        layer = torch.nn.Linear(3, 2, bias=False)
        with torch.no_grad():
            layer.weight.copy_(torch.arange(6.0).reshape(2, 3))
        said = {"equal": _said(layer)}
        if rank == 1:
            with torch.no_grad():
                layer.weight[0, 0], layer.weight[0, 1] = 1.0, 0.0
        said["swapped"] = _said(layer)
        Path(folder, f"rank{rank}.json").write_text(json.dumps(said))
    finally:
        torch.distributed.destroy_process_group()
