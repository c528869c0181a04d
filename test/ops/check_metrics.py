#!/usr/bin/env python3
"""Check that the Grafana dashboard and the alert rules name only series
that contrib/prometheus/queries.yaml exports.

  check_metrics.py QUERIES.yaml DASHBOARD.json RULES.yml

The exported series are <namespace>_<column> for every column of the
queries file that is not a LABEL; the labels are its LABEL columns plus
those the exporter (server) and Prometheus (job, instance) add.  Every
PromQL expression of the dashboard (panel targets and variable queries)
and of the rules is tokenised: each metric name it selects must be
exported, each label it matches or groups by must exist, and each
expression must parse (promtool check rules, when promtool is installed).
Prints one "ok"/"not ok" line per check and ends with "N passed, N failed".
"""
import json
import re
import subprocess
import sys
import tempfile

import yaml

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right",
            "and", "or", "unless", "bool", "offset", "inf", "nan"}
SCRAPE_LABELS = {"server", "job", "instance"}

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok - " + what)
    else:
        failed += 1
        print("not ok - " + what)


def exported(path):
    metrics, labels = set(), set(SCRAPE_LABELS)
    for ns, spec in yaml.safe_load(open(path)).items():
        for col in spec["metrics"]:
            (name, m), = col.items()
            if m["usage"] == "LABEL":
                labels.add(name)
            elif m["usage"] != "DISCARD":
                metrics.add(f"{ns}_{name}")
    return metrics, labels


def grafana_to_promql(expr):
    """Replace Grafana's macros and variables by values PromQL accepts."""
    expr = re.sub(r"\$__(rate_)?interval|\$__range", "5m", expr)
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def names_in(expr):
    """Return (metric names, label names) an expression uses."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", expr, re.S)
    if m:
        metrics, labels = names_in(m.group(1))
        return metrics, labels | {m.group(2)}
    labels = set()
    # label matchers {a="x", b=~"y"}
    for body in re.findall(r"\{([^}]*)\}", expr):
        labels |= set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)\s*\"", body))
    # grouping by (...) / without (...) / on (...) / ignoring (...)
    for body in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr):
        labels |= {w.strip() for w in body.split(",") if w.strip()}
    rest = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    rest = re.sub(r"\{[^}]*\}", " ", rest)
    rest = re.sub(r"\[[^\]]*\]", " ", rest)
    rest = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", rest)
    metrics = set()
    for tok in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", rest):
        word = tok.group(0)
        after = rest[tok.end():].lstrip()
        if word.lower() in KEYWORDS or after.startswith("("):
            continue
        if re.fullmatch(r"\d+[smhdwy]", word):
            continue
        metrics.add(word)
    return metrics, labels


def check_expr(where, expr, metrics, labels):
    used, used_labels = names_in(expr)
    check(bool(used), f"{where}: names at least one series")
    for name in sorted(used):
        check(name in metrics, f"{where}: {name} is exported by the queries file")
    for label in sorted(used_labels):
        check(label in labels, f"{where}: label {label} exists")


def promtool_parses(exprs):
    """Each expression as a recording rule: promtool check rules parses it."""
    try:
        subprocess.run(["promtool", "--version"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        print("# promtool not installed: expressions not parsed")
        return
    rules = [{"record": f"idem_gate:check_{i}", "expr": e} for i, (_, e) in enumerate(exprs)]
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        yaml.safe_dump({"groups": [{"name": "check", "rules": rules}]}, f)
        f.flush()
        r = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
    check(r.returncode == 0, f"promtool parses all {len(exprs)} expressions")
    if r.returncode != 0:
        print(r.stdout + r.stderr)


def main():
    queries, dashboard, rules = sys.argv[1:4]
    metrics, labels = exported(queries)
    check(len(metrics) > 0, f"queries file exports {len(metrics)} series")
    exprs = []
    dash = json.load(open(dashboard))
    for p in dash.get("panels", []):
        targets = p.get("targets", [])
        check(len(targets) > 0, f"panel '{p.get('title')}' has queries")
        for t in targets:
            exprs.append((f"panel '{p['title']}' {t.get('refId')}", grafana_to_promql(t["expr"])))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            exprs.append((f"variable {v['name']}", grafana_to_promql(q)))
    for g in yaml.safe_load(open(rules))["groups"]:
        for r in g["rules"]:
            exprs.append((f"rule {r.get('alert') or r.get('record')}", r["expr"]))
    for where, e in exprs:
        check_expr(where, e, metrics, labels)
    promtool_parses([(w, e) for w, e in exprs if not w.startswith("variable")])
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
