from django.core.management.base import BaseCommand

from webapp.demo import DEMO_USERS, demo_password, seed_demo


class Command(BaseCommand):
    help = "Create (or refresh) the demo project and the users admin, manager and annotator."

    def handle(self, *args, **options):
        password, generated = demo_password()
        seed_demo(password)
        note = " (generated; set LOUPE_DEMO_PASSWORD to choose it)" if generated else ""
        self.stdout.write(f"Demo logins: {', '.join(DEMO_USERS)} / password: {password}{note}")
