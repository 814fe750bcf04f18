#!/usr/bin/env python3
"""Validates Kubernetes manifests offline: built-in kinds against the
schemas of one Kubernetes version (kubernetes-validate, strict: unknown
fields are errors), COSI kinds against the openAPIV3Schema of our CRDs.

usage: validate-manifests.py --kubernetes-version 1.30 --crds deploy/crds FILE...
Exits 1 and prints every problem when a document is invalid.
"""

import argparse
import glob
import os
import sys

import jsonschema
import kubernetes_validate
import yaml


def crd_schemas(directory):
    """(group, version, kind) -> openAPIV3Schema of every CRD in directory."""
    schemas = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.yaml"))):
        with open(path) as f:
            for crd in yaml.safe_load_all(f):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                spec = crd["spec"]
                for v in spec["versions"]:
                    key = (spec["group"], v["name"], spec["names"]["kind"])
                    schemas[key] = v["schema"]["openAPIV3Schema"]
    return schemas


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes-version", required=True)
    parser.add_argument("--crds", required=True)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    schemas = crd_schemas(args.crds)
    problems, count = [], 0
    for path in args.files:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for doc in docs:
            count += 1
            what = "%s %s/%s" % (path, doc.get("kind"), doc.get("metadata", {}).get("name"))
            group, _, version = doc.get("apiVersion", "").rpartition("/")
            if group in ("monitoring.coreos.com", "ceph.rook.io"):
                # The Prometheus Operator's and Rook's schemas are not available offline.
                print("%s: not validated (no offline schema for %s)" % (what, group))
                continue
            schema = schemas.get((group, version, doc.get("kind")))
            if group.endswith("objectstorage.k8s.io"):
                if schema is None:
                    problems.append("%s: no CRD defines %s" % (what, doc.get("apiVersion")))
                    continue
                for e in jsonschema.Draft7Validator(schema).iter_errors(doc):
                    problems.append("%s: %s at %s" % (what, e.message, list(e.path)))
                continue
            try:
                kubernetes_validate.validate(doc, args.kubernetes_version, strict=True)
            except kubernetes_validate.ValidationError as e:
                problems.append("%s: %s at %s" % (what, e.message, list(e.path)))
            except kubernetes_validate.SchemaNotFoundError as e:
                problems.append("%s: %s" % (what, e))
    for p in problems:
        print(p)
    print("%d documents, %d problems (Kubernetes %s)" % (count, len(problems), args.kubernetes_version))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
