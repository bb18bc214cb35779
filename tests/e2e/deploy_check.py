#!/usr/bin/python3
"""Checks the files of docs/deploy without a cluster, a Prometheus or a Grafana, against each
other and against the /metrics page of a real hearth serve (METRICS_FILE). Usage:

  deploy_check.py kubernetes MANIFEST_DIR METRICS_FILE
      every manifest against a JSON schema of the fields Kubernetes and the Gateway API
      Inference Extension require (kubectl's client dry run still asks an API server for its
      discovery), the manifests against each other, the picker's metric names
  deploy_check.py rules RULES_FILE TESTS_FILE METRICS_FILE
      the alert rules' series exist, each alert has a severity, a summary and a description,
      and TESTS_FILE (promtool test rules) has a case where it fires and one where it does not
  deploy_check.py grafana DASHBOARD METRICS_FILE RULES_OUT
      the dashboard's structure, its datasource variable ${DS_PROMETHEUS}, every query's series;
      writes the queries to RULES_OUT as recording rules, for `promtool check rules` to parse
  deploy_check.py container CONTAINER_DIR
      the Containerfile and the Quadlet unit hearth.container against each other

Exit 1 with one line per problem."""
import glob
import json
import os
import re
import shlex
import sys

try:  # the kubernetes and rules checks need them; grafana and container do not
    import jsonschema
    import yaml
except ImportError:
    jsonschema = yaml = None


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


def kubernetes(manifests, metrics_file):
    exported = exported_types(metrics_file)
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
    # the image's ENTRYPOINT (container/Containerfile) already says `hearth serve --host 0.0.0.0`
    if not container.get("command", [""])[0].endswith("/hearth"):
        problems.append("Deployment: args begin with serve, so command must name the hearth "
                        "binary (the image's entrypoint is hearth serve)")
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



# ------------------------------------------------------------------ PromQL ---

def exported_types(metrics_file):
    """{family: type} of the metrics page's # TYPE lines."""
    text = open(metrics_file).read()
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


# words of PromQL that look like series names; functions are told by their "("
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                "unless", "bool", "offset", "inf", "nan", "sum", "min", "max", "avg", "group",
                "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile"}
PROMETHEUS_OWN = {"up"}  # series Prometheus writes itself for every target


def promql_names(expr):
    """The series names a PromQL expression selects."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges, subqueries
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+-?\w+", " ", e)
    e = re.sub(r"(?<![\w:])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][\w:]*", e):
        if e[m.end():].lstrip().startswith("(") or m.group(0) in PROMQL_WORDS:
            continue
        names.add(m.group(0))
    return names


def check_names(expr, where, exported):
    """Each series of expr is one hearth serve exports (a histogram's _bucket, _sum, _count)."""
    names = promql_names(expr)
    if not names:
        problems.append(f"{where}: no series found in {expr!r}")
    for name in sorted(names):
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        if name in PROMETHEUS_OWN or name in exported:
            continue
        if family != name and exported.get(family) == "histogram":
            continue
        problems.append(f"{where}: {name!r} is not a series hearth serve exports")


# ------------------------------------------------------------------- rules ---

def rules(rules_file, tests_file, metrics_file):
    exported = exported_types(metrics_file)
    doc = yaml.safe_load(open(rules_file))
    alerts = []
    for group in doc.get("groups", []):
        for rule in group.get("rules", []):
            name = rule.get("alert") or rule.get("record")
            check_names(str(rule.get("expr", "")), f"rule {name}", exported)
            if "alert" not in rule:
                continue
            alerts.append(name)
            if rule.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
                problems.append(f"alert {name}: severity is not critical, warning or info")
            for key in ("summary", "description"):
                if not rule.get("annotations", {}).get(key):
                    problems.append(f"alert {name}: no {key} annotation")
    if not alerts:
        problems.append(f"{rules_file}: no alerts")
    tests = yaml.safe_load(open(tests_file))
    if os.path.basename(rules_file) not in tests.get("rule_files", []):
        problems.append(f"{tests_file}: rule_files does not name {os.path.basename(rules_file)}")
    fires, quiet = set(), set()
    for i, test in enumerate(tests.get("tests", [])):
        for series in test.get("input_series", []):
            check_names(series["series"].split("{")[0], f"{tests_file} test {i}", exported)
        for case in test.get("alert_rule_test", []):
            (fires if case.get("exp_alerts") else quiet).add(case.get("alertname"))
    for name in alerts:
        if name not in fires:
            problems.append(f"alert {name}: no test where it fires")
        if name not in quiet:
            problems.append(f"alert {name}: no test where it must not fire")
    for name in (fires | quiet) - set(alerts):
        problems.append(f"{tests_file}: tests alert {name}, which the rules do not define")


# ----------------------------------------------------------------- grafana ---

DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
# Grafana's own variables, as PromQL would read them once Grafana has put them in
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def grafana(dashboard, metrics_file, rules_out):
    exported = exported_types(metrics_file)
    dash = json.load(open(dashboard))
    for key in ("title", "uid", "panels", "templating", "schemaVersion"):
        if key not in dash:
            problems.append(f"dashboard: no {key}")
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("DS_PROMETHEUS", {})
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("dashboard: no datasource variable DS_PROMETHEUS of type prometheus")
    queries = []  # (where, expr)
    for name, v in variables.items():
        if v.get("type") != "query":
            continue
        if v.get("datasource") != DS:
            problems.append(f"variable {name}: datasource is not ${{DS_PROMETHEUS}}")
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else q or ""
        m = re.fullmatch(r"label_values\((.+),\s*\w+\)", q)
        if not m:
            problems.append(f"variable {name}: {q!r} is not label_values(SERIES, LABEL)")
            continue
        queries.append((f"variable {name}", m.group(1)))
    panels, ids = [], set()
    for p in dash.get("panels", []):
        panels.append(p)
        panels.extend(p.get("panels", []))  # a collapsed row holds its own
    for p in panels:
        where = f"panel {p.get('id')} ({p.get('title')!r})"
        if not isinstance(p.get("id"), int) or p["id"] in ids:
            problems.append(f"{where}: its id is missing or not unique")
        ids.add(p.get("id"))
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in "xywh") or g["x"] + g["w"] > 24:
            problems.append(f"{where}: gridPos is not within the 24 columns")
        if p.get("type") == "row":
            continue
        if p.get("datasource") != DS:
            problems.append(f"{where}: datasource is not ${{DS_PROMETHEUS}}")
        if not p.get("targets"):
            problems.append(f"{where}: no queries")
        for t in p.get("targets", []):
            tw = f"{where} query {t.get('refId')}"
            if t.get("datasource") != DS:
                problems.append(f"{tw}: datasource is not ${{DS_PROMETHEUS}}")
            expr = t.get("expr", "")
            for sel in re.findall(r"\bhearth_\w+(?:\{[^}]*\})?", expr):
                if '$instance' not in sel:
                    problems.append(f"{tw}: {sel} does not follow the instance variable")
            queries.append((tw, expr))
    out = []
    for where, expr in queries:
        check_names(expr, where, exported)
        for var, value in GRAFANA_VARS.items():
            expr = expr.replace(var, value)
        expr = re.sub(r"\$\{?\w+\}?", ".*", expr)  # a dashboard variable: any value
        record = "grafana:" + re.sub(r"\W+", "_", where).strip("_")
        out.append({"record": record, "expr": expr})
    # JSON is YAML: promtool reads it as a rules file
    with open(rules_out, "w") as f:
        json.dump({"groups": [{"name": "grafana", "rules": out}]}, f, indent=1)


# --------------------------------------------------------------- container ---

def dockerfile(path):
    """[(INSTRUCTION, arguments)] of a Containerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", open(path).read())
    lines = [ln.strip() for ln in text.splitlines()]
    return [tuple((ln.split(None, 1) + [""])[:2]) for ln in lines if ln and not ln.startswith("#")]


def unit_file(path):
    """{section: [(key, value)]} of a systemd unit file."""
    sections, cur = {}, None
    text = re.sub(r"\\\n", " ", open(path).read())
    for ln in text.splitlines():
        ln = ln.strip()
        if not ln or ln[0] in "#;":
            continue
        if ln.startswith("[") and ln.endswith("]"):
            cur = sections.setdefault(ln[1:-1], [])
        elif "=" in ln and cur is not None:
            key, value = ln.split("=", 1)
            cur.append((key.strip(), value.strip()))
        else:
            problems.append(f"{os.path.basename(path)}: cannot read {ln!r}")
    return sections


# [Container] keys of Podman's Quadlet (podman-systemd.unit(5), Podman 4.4 and later)
QUADLET_KEYS = {
    "AddCapability", "AddDevice", "Annotation", "AutoUpdate", "ContainerName", "DropCapability",
    "Environment", "EnvironmentFile", "EnvironmentHost", "Exec", "ExposeHostPort", "Group",
    "HealthCmd", "HealthInterval", "HealthOnFailure", "HealthRetries", "HealthStartPeriod",
    "HealthStartupCmd", "HealthStartupInterval", "HealthStartupRetries", "HealthStartupSuccess",
    "HealthStartupTimeout", "HealthTimeout", "HostName", "Image", "IP", "IP6", "Label",
    "LogDriver", "Mount", "Network", "NoNewPrivileges", "Notify", "PodmanArgs", "PublishPort",
    "Pull", "ReadOnly", "RunInit", "SeccompProfile", "Secret", "SecurityLabelDisable",
    "SecurityLabelFileType", "SecurityLabelLevel", "SecurityLabelType", "ShmSize", "StopTimeout",
    "Sysctl", "Timezone", "Tmpfs", "User", "UserNS", "Volume", "WorkingDir",
}


def container(cdir):
    cf = dockerfile(os.path.join(cdir, "Containerfile"))
    where = "Containerfile"
    froms = [i for i, (ins, _) in enumerate(cf) if ins.upper() == "FROM"]
    if not froms:
        problems.append(f"{where}: no FROM")
        return
    if ("ARG", "BASE=docker.io/library/debian:12") not in cf[:froms[0]]:
        problems.append(f"{where}: no ARG BASE=docker.io/library/debian:12 before the first FROM")
    for i in froms:
        if cf[i][1].split()[0] not in ("$BASE", "${BASE}"):
            problems.append(f"{where}: {cf[i][0]} {cf[i][1]} is not FROM $BASE")
    if not any(ins.upper() == "RUN" and "sh scripts/deps.sh" in a for ins, a in cf):
        problems.append(f"{where}: the build's packages are not installed by sh scripts/deps.sh")
    final = {}
    for ins, a in cf[froms[-1]:]:  # the image's stage
        final.setdefault(ins.upper(), []).append(a)
    user = (final.get("USER") or ["root"])[-1]
    if user.split(":")[0] in ("root", "0"):
        problems.append(f"{where}: the image runs as root")
    exposed = {int(p.split("/")[0]) for a in final.get("EXPOSE", []) for p in a.split()}
    try:
        entry = json.loads((final.get("ENTRYPOINT") or ["[]"])[-1])
    except ValueError:
        entry = []
        problems.append(f"{where}: ENTRYPOINT is not in its JSON form")
    port = int(entry[entry.index("--port") + 1]) if "--port" in entry[:-1] else 8080
    if entry[1:2] != ["serve"] or "--host" not in entry[:-1] or \
            entry[entry.index("--host") + 1] != "0.0.0.0":
        problems.append(f"{where}: ENTRYPOINT is not hearth serve --host 0.0.0.0")
    if port not in exposed:
        problems.append(f"{where}: hearth serve's port {port} is not EXPOSEd")
    health = " ".join(final.get("HEALTHCHECK", []))
    if f":{port}/health" not in health:
        problems.append(f"{where}: HEALTHCHECK does not ask :{port}/health")
    volumes = {v for a in final.get("VOLUME", []) for v in a.split()}
    if "/models" not in volumes:
        problems.append(f"{where}: no VOLUME /models for the model")

    unit = unit_file(os.path.join(cdir, "hearth.container"))
    where = "hearth.container"
    for section in unit:
        if section not in ("Unit", "Container", "Service", "Install"):
            problems.append(f"{where}: section [{section}] is not one Quadlet passes or reads")
    keys = unit.get("Container", [])
    for key, _ in keys:
        if key not in QUADLET_KEYS:
            problems.append(f"{where}: [Container] {key}= is not a Quadlet key")
    c = {}
    for key, value in keys:
        c.setdefault(key, []).append(value)
    if not c.get("Image"):
        problems.append(f"{where}: no Image=")
    if not any(p.rsplit(":", 1)[-1] == str(port) for p in c.get("PublishPort", [])):
        problems.append(f"{where}: no PublishPort= to the container's port {port}")
    if not any(f":{port}/health" in h for h in c.get("HealthCmd", [])):
        problems.append(f"{where}: HealthCmd= does not ask :{port}/health")
    if not any(v.split(":")[1:2] == ["/models"] for v in c.get("Volume", [])):
        problems.append(f"{where}: no Volume= at /models")
    execs = shlex.split(" ".join(c.get("Exec", [])))
    if "-m" not in execs[:-1] or not execs[execs.index("-m") + 1].startswith("/models/"):
        problems.append(f"{where}: Exec= does not give -m a model under /models")


MODES = {"kubernetes": (kubernetes, 2), "rules": (rules, 3), "grafana": (grafana, 3),
         "container": (container, 1)}

if len(sys.argv) < 2 or sys.argv[1] not in MODES or len(sys.argv) != MODES[sys.argv[1]][1] + 2:
    print(__doc__.strip(), file=sys.stderr)
    sys.exit(2)
if sys.argv[1] in ("kubernetes", "rules") and yaml is None:
    print("deploy_check.py: python3-yaml and python3-jsonschema are needed", file=sys.stderr)
    sys.exit(2)
MODES[sys.argv[1]][0](*sys.argv[2:])
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
