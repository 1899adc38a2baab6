"""python3 -m deploy.stack.components env|ready <name> [--offset N] [--ca-bundle FILE],
env-all [--offset N]: every component's env, or args <binary> --offset N --cluster-dir D
--config-dir C: its command line, one argument a line, or config <name> (same options): its
configuration file's content, JSON (deploy/stack/component.py)."""

import argparse
import json
import sys

from ..component import Site
from . import COMPONENTS, get, of_binary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m deploy.stack.components")
    parser.add_argument("command", choices=["env", "env-all", "ready", "args", "config"])
    parser.add_argument("name", nargs="?")
    parser.add_argument("--offset", type=int, default=0, help="added to every port")
    parser.add_argument("--ca-bundle", help="verifies the https readiness URLs")
    parser.add_argument("--cluster-dir", help="args: the cluster's state directory")
    parser.add_argument("--config-dir", help="args: the cluster's configuration files")
    args = parser.parse_intermixed_args(argv)  # `ready --ca-bundle F hydra`: options before the name too
    if (args.name is None) != (args.command == "env-all"):
        parser.error("env and ready name one component; env-all none")
    if args.command in ("args", "config"):
        return print_for_site(parser, args)
    if args.command == "ready":
        return 0 if get(args.name).is_ready(args.offset, args.ca_bundle) else 1
    chosen = COMPONENTS.values() if args.command == "env-all" else [get(args.name)]
    print("\n".join(f"{key}={value}" for c in chosen for key, value in c.env(args.offset).items()))
    return 0


def print_for_site(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if not (args.cluster_dir and args.config_dir):
        parser.error(f"{args.command} needs --cluster-dir and --config-dir")
    site = Site(args.cluster_dir, args.config_dir, args.offset)
    if args.command == "config":
        component = get(args.name)
        if component.config is None:
            parser.error(f"{args.name} has no configuration file")
        print(json.dumps(component.config(site), indent=2))
        return 0
    line = of_binary(args.name).args(args.name, site)
    if any("\n" in arg for arg in line) or (line and line[-1] == ""):
        parser.error(f"{args.name}: an argument a line cannot say {line!r}")
    print("\n".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
