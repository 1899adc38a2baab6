"""python3 -m deploy.stack.components env|ready <name> [--offset N] [--ca-bundle FILE]
(deploy/stack/component.py)."""

import argparse
import sys

from . import get


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m deploy.stack.components")
    parser.add_argument("command", choices=["env", "ready"])
    parser.add_argument("name")
    parser.add_argument("--offset", type=int, default=0, help="added to every port")
    parser.add_argument("--ca-bundle", help="verifies the https readiness URLs")
    args = parser.parse_args(argv)
    component = get(args.name)
    if args.command == "env":
        print("\n".join(f"{key}={value}" for key, value in component.env(args.offset).items()))
        return 0
    return 0 if component.is_ready(args.offset, args.ca_bundle) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
