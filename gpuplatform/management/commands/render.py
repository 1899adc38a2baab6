"""Print the YAML the platform would apply, kubectl-ready (multi-document)."""

import yaml
from django.core.management.base import BaseCommand, CommandError

from core.owners import Scope, registered

from ...owners import render

# How each scope's item is named on the command line.
ARGUMENT = {Scope.TEAM: "a slug", Scope.JOB: "the job's numeric id"}


class Command(BaseCommand):
    help = "Render cluster objects as YAML: `render cluster`, `render team SLUG`, `render job ID`."

    def add_arguments(self, parser):
        parser.add_argument("what", choices=[str(scope) for scope in Scope])
        parser.add_argument("key", nargs="?", help="team slug or job id")

    def handle(self, *args, what, key, **options):
        scope = Scope(what)
        if scope is Scope.CLUSTER:
            key = ""
        elif not key or (scope is Scope.JOB and not key.isdigit()):
            raise CommandError(f"render {scope} needs {ARGUMENT[scope]}.")
        owner = next(o for o in registered() if o.scope is scope)
        found = owner.key_for(key)
        objects = None if found is None else render(scope, found)
        if objects is None:
            raise CommandError(f"No {scope} {key!r}.")
        self.stdout.write(yaml.safe_dump_all(objects, sort_keys=False, explicit_start=True), ending="")
