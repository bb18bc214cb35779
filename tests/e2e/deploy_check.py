#!/usr/bin/python3
"""Checks docs/deploy/kubernetes without a cluster (kubectl's client dry run still asks an API
server for its discovery): every document against a JSON schema of the fields Kubernetes and
the Gateway API Inference Extension require, and the documents against each other and against
hearth serve's /metrics page. Usage: deploy_check.py MANIFEST_DIR METRICS_FILE; exit 1 with
one line per problem."""
import glob
import os
import re
import sys

import jsonschema
import yaml

NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
LABELS = {"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1}
META = {"type": "object", "required": ["name"], "properties": {"name": NAME, "labels": LABELS}}
PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
PROBE = {
    "type": "object",
    "properties": {
        "httpGet": {"type": "object", "required": ["path", "port"]},
        "tcpSocket": {"type": "object", "required": ["port"]},
        "periodSeconds": {"type": "integer", "minimum": 1},
        "failureThreshold": {"type": "integer", "minimum": 1},
    },
    "oneOf": [{"required": ["httpGet"]}, {"required": ["tcpSocket"]}],
}
CONTAINER = {
    "type": "object",
    "required": ["name", "image", "ports", "readinessProbe"],
    "properties": {
        "name": NAME,
        "image": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
        "ports": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["containerPort"],
            "properties": {"containerPort": PORT, "name": {"type": "string", "maxLength": 15}}}},
        "readinessProbe": PROBE, "livenessProbe": PROBE, "startupProbe": PROBE,
        "volumeMounts": {"type": "array", "items": {"type": "object", "required": ["name", "mountPath"]}},
    },
}
SCHEMAS = {
    ("v1", "PersistentVolumeClaim"): {
        "required": ["metadata", "spec"],
        "properties": {"metadata": META, "spec": {"type": "object", "required": ["accessModes", "resources"]}},
    },
    ("apps/v1", "Deployment"): {
        "required": ["metadata", "spec"],
        "properties": {"metadata": META, "spec": {
            "type": "object", "required": ["selector", "template"],
            "properties": {
                "replicas": {"type": "integer", "minimum": 1},
                "selector": {"type": "object", "required": ["matchLabels"], "properties": {"matchLabels": LABELS}},
                "template": {"type": "object", "required": ["metadata", "spec"], "properties": {
                    "metadata": {"type": "object", "required": ["labels"], "properties": {"labels": LABELS}},
                    "spec": {"type": "object", "required": ["containers"], "properties": {
                        "containers": {"type": "array", "minItems": 1, "items": CONTAINER},
                        "volumes": {"type": "array", "items": {"type": "object", "required": ["name"]}}}}}}}}},
    },
    ("v1", "Service"): {
        "required": ["metadata", "spec"],
        "properties": {"metadata": META, "spec": {
            "type": "object", "required": ["selector", "ports"],
            "properties": {"selector": LABELS, "ports": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["port"], "properties": {"port": PORT}}}}}},
    },
    ("inference.networking.k8s.io/v1", "InferencePool"): {
        "required": ["metadata", "spec"],
        "properties": {"metadata": META, "spec": {
            "type": "object", "required": ["selector", "targetPorts", "endpointPickerRef"],
            "properties": {
                "selector": {"type": "object", "required": ["matchLabels"], "properties": {"matchLabels": LABELS}},
                "targetPorts": {"type": "array", "minItems": 1, "maxItems": 8, "items": {
                    "type": "object", "required": ["number"], "properties": {"number": PORT}}},
                "endpointPickerRef": {"type": "object", "required": ["name", "port"], "properties": {
                    "name": NAME, "port": {"type": "object", "required": ["number"], "properties": {"number": PORT}}}}}}},
    },
    ("v1", "ConfigMap"): {
        "required": ["metadata", "data"],
        "properties": {"metadata": META, "data": {"type": "object", "additionalProperties": {"type": "string"}}},
    },
}
PICKER = {
    "type": "object",
    "required": ["apiVersion", "kind", "plugins"],
    "properties": {
        "apiVersion": {"const": "inference.networking.x-k8s.io/v1alpha1"},
        "kind": {"const": "EndpointPickerConfig"},
        "plugins": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["type"]}},
    },
}

problems = []


def check(doc, where):
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key not in SCHEMAS:
        problems.append(f"{where}: no schema for {key}")
        return
    schema = dict(SCHEMAS[key], type="object")
    for e in jsonschema.Draft7Validator(schema).iter_errors(doc):
        problems.append(f"{where} ({key[1]}): {'/'.join(map(str, e.path))}: {e.message}")


def main():
    manifests, metrics_file = sys.argv[1], sys.argv[2]
    metrics = open(metrics_file).read()
    exported = set(re.findall(r"^# TYPE (\S+) ", metrics, re.M))
    docs = []
    for path in sorted(glob.glob(os.path.join(manifests, "*.yaml"))):
        for i, doc in enumerate(yaml.safe_load_all(open(path))):
            if doc is not None:
                docs.append((doc, f"{os.path.basename(path)}#{i}"))
                check(doc, f"{os.path.basename(path)}#{i}")
    by_kind = {}
    for doc, where in docs:
        by_kind.setdefault(doc.get("kind"), []).append(doc)
    if problems:
        return
    dep = by_kind["Deployment"][0]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    ports = {p["containerPort"] for p in container["ports"]}
    if not set(dep["spec"]["selector"]["matchLabels"].items()) <= set(pod_labels.items()):
        problems.append("Deployment: its selector does not select its own pods")
    if container["readinessProbe"].get("httpGet", {}).get("path") != "/health":
        problems.append("Deployment: readiness is not hearth's /health")
    args = container.get("args", [])
    if args[:1] != ["serve"] or "--port" not in args or int(args[args.index("--port") + 1]) not in ports:
        problems.append("Deployment: hearth serve's --port is not the container port")
    claims = {d["metadata"]["name"] for d in by_kind.get("PersistentVolumeClaim", [])}
    for v in dep["spec"]["template"]["spec"].get("volumes", []):
        c = v.get("persistentVolumeClaim", {}).get("claimName")
        if c and c not in claims:
            problems.append(f"Deployment: volume {v['name']} names claim {c}, which is not defined")
    for svc in by_kind.get("Service", []):
        if not set(svc["spec"]["selector"].items()) <= set(pod_labels.items()):
            problems.append(f"Service {svc['metadata']['name']}: selects no hearth pod")
    for pool in by_kind.get("InferencePool", []):
        if not set(pool["spec"]["selector"]["matchLabels"].items()) <= set(pod_labels.items()):
            problems.append("InferencePool: selects no hearth pod")
        for t in pool["spec"]["targetPorts"]:
            if t["number"] not in ports:
                problems.append(f"InferencePool: target port {t['number']} is not hearth's")
    engine = pod_labels.get("inference.networking.k8s.io/engine-type")
    found = False
    for cm in by_kind.get("ConfigMap", []):
        for key, text in cm["data"].items():
            cfg = yaml.safe_load(text)
            for e in jsonschema.Draft7Validator(PICKER).iter_errors(cfg):
                problems.append(f"ConfigMap {key}: {'/'.join(map(str, e.path))}: {e.message}")
            for plugin in cfg.get("plugins", []):
                if plugin.get("type") != "model-server-protocol-metrics":
                    continue
                params = plugin.get("parameters", {})
                for ec in params.get("engineConfigs", []):
                    if ec.get("name") != engine:
                        continue
                    found = True
                    for spec in ("queuedRequestsSpec", "runningRequestsSpec", "kvUsageSpec", "cacheInfoSpec"):
                        name = ec.get(spec, "").split("{")[0]
                        if name not in exported:
                            problems.append(f"ConfigMap: {spec} names {name!r}, which hearth serve does not export")
                if params.get("defaultEngine") not in (None, engine):
                    problems.append("ConfigMap: defaultEngine is not hearth's engine")
    if not found:
        problems.append(f"no endpoint picker configuration for the pods' engine-type {engine!r}")


main()
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
