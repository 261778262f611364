"""Validates Kubernetes objects against the schemas of Kubernetes releases, strictly (an unknown field is an
error), offline: the schemas ship inside the kubernetes-validate package (scripts/kube-tools.sh installs it).

    python kube-validate.py --versions 1.35,1.36,1.37 RENDERED.yaml...

Prints one JSON line per object and version: {"object", "apiVersion", "version", "result", "message"}, where
result is "ok", "invalid" or "no-schema" (a kind Kubernetes does not define: a custom resource, checked by
scripts/kube-crds/validate.mjs). `--shipped` prints the Kubernetes versions the package has schemas for.
Exits 1 if an object is invalid.
"""

import argparse
import functools
import json
import sys

import yaml
import kubernetes_validate.utils as kv

# kubernetes-validate reads a release's definitions (megabytes of JSON) again for every object: read each once
kv.schema_contents = functools.lru_cache(maxsize=None)(kv.schema_contents)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--versions", default="")
    parser.add_argument("--shipped", action="store_true")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    if args.shipped:
        print(json.dumps(sorted(set(kv.all_versions()), key=lambda v: [int(x) for x in v.split(".")])))
        return 0
    versions = [v for v in args.versions.split(",") if v]
    if not versions or not args.files:
        parser.error("--versions and at least one file are required")
    failed = False
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            objects = [o for o in yaml.safe_load_all(f) if o]
        for obj in objects:
            name = "%s/%s" % (obj.get("kind"), (obj.get("metadata") or {}).get("name"))
            for version in versions:
                line = {"file": path, "object": name, "apiVersion": obj.get("apiVersion"), "version": version}
                try:
                    line["validated_against"] = kv.validate(obj, version, strict=True)
                    line["result"] = "ok"
                except kv.ValidationError as e:
                    where = ".".join(str(p) for p in e.path)
                    line.update(result="invalid", message="%s: %s" % (where, e.message))
                    failed = True
                except kv.SchemaNotFoundError as e:
                    line.update(result="no-schema", message=e.message)
                except kv.VersionNotSupportedError as e:
                    line.update(result="invalid", message=e.message)
                    failed = True
                print(json.dumps(line))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
