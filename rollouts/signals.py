"""What rollouts announces to the layers above it, which it does not import (annotation's judge listens)."""
from django.dispatch import Signal

# An episode finished (status FINISHED or FAILED), sent inside the finish's transaction: ``episode=``.
episode_finished = Signal()
