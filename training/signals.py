"""What training asks of the layers above it, which it does not import (cycles answers)."""
from django.dispatch import Signal

# A running run's worker stopped heartbeating: ``run=``. A receiver that resumes the run itself (a cycle resumes
# its own run under its lease) returns True, and the sweep leaves the run alone.
run_stalled = Signal()
