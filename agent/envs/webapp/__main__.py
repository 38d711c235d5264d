"""``python -m agent.envs.webapp build [--log PATH]``: build the webapp env's sites (what ``make sites`` runs)."""
import sys

from agent.envs.webapp.sites import main

sys.exit(main(sys.argv[1:]))
