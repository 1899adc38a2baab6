"""Point a controller's webhook definitions at its server on 127.0.0.1 (cluster.sh).

stdin: the webhook configurations of a module (`kubectl create --dry-run=client -o json -f
manifests.yaml`: one JSON document per object, or a List); stdout: a List to apply, each
configuration renamed <prefix>-<name>, each webhook's service replaced by
https://127.0.0.1:<port><path> with the cluster's CA bundle. A webhook on pods gets the object
selector its module's kustomize patch gives it (only its own pods: `--pod-label` Exists) and
leaves the system namespaces alone. Standard library only (cluster.sh runs `python3 -E`).

    python3 -E webhooks.py --prefix jobset --port 16945 --ca pki/ca.crt [--pod-label KEY] [--keep=PART ...]
"""

import argparse
import base64
import json
import sys

SYSTEM_NAMESPACES = ["kube-system", "kueue-system", "volcano-system"]


def documents(text: str) -> list[dict]:
    items, pos, decoder = [], 0, json.JSONDecoder()
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        obj, pos = decoder.raw_decode(text, pos)
        items.extend(obj["items"] if obj.get("kind") == "List" else [obj])
    return items


def local_webhook(hook: dict, args: argparse.Namespace, ca: str) -> dict:
    path = hook["clientConfig"]["service"]["path"]
    hook["clientConfig"] = {"url": f"https://127.0.0.1:{args.port}{path}", "caBundle": ca}
    if path.endswith("--v1-pod"):
        hook["namespaceSelector"] = {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": SYSTEM_NAMESPACES}]}
        if args.pod_label:
            hook["objectSelector"] = {"matchExpressions": [{"key": args.pod_label, "operator": "Exists"}]}
    return hook


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--port", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--pod-label", help="the label its pods carry (pod webhooks select them only)")
    parser.add_argument("--keep", action="append", help="keep only the webhooks whose path contains this (repeatable; --keep=PART)")
    args = parser.parse_args()
    with open(args.ca, "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    items = documents(sys.stdin.read())
    for obj in items:
        obj["metadata"] = {"name": f"{args.prefix}-{obj['metadata']['name']}",
                           "labels": {"app.kubernetes.io/part-of": "gpuplatform-local-cluster"}}
        hooks = obj.get("webhooks", [])
        if args.keep:
            hooks = [h for h in hooks if any(k in h["clientConfig"]["service"]["path"] for k in args.keep)]
        obj["webhooks"] = [local_webhook(h, args, ca) for h in hooks]
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)


if __name__ == "__main__":
    main()
