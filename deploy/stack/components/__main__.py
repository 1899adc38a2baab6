"""python3 -m deploy.stack.components env|ready <name> [--offset N] [--ca-bundle FILE], or
env-all [--offset N]: every component's env (deploy/stack/component.py)."""

import argparse
import sys

from . import COMPONENTS, get


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m deploy.stack.components")
    parser.add_argument("command", choices=["env", "env-all", "ready"])
    parser.add_argument("name", nargs="?")
    parser.add_argument("--offset", type=int, default=0, help="added to every port")
    parser.add_argument("--ca-bundle", help="verifies the https readiness URLs")
    args = parser.parse_args(argv)
    if (args.name is None) != (args.command == "env-all"):
        parser.error("env and ready name one component; env-all none")
    if args.command == "ready":
        return 0 if get(args.name).is_ready(args.offset, args.ca_bundle) else 1
    chosen = COMPONENTS.values() if args.command == "env-all" else [get(args.name)]
    print("\n".join(f"{key}={value}" for c in chosen for key, value in c.env(args.offset).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
