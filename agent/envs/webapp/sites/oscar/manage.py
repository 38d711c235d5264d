#!/usr/bin/env python
"""The shop site's manage.py; run it with the site's own venv (see agent/envs/webapp/sites.py)."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
