"""The shipped alerting rules (deploy/prometheus/sluice-rules.yml) and
Grafana dashboard (deploy/grafana/sluice-dashboard.json), docs/operations.md
"Shipped alerting".

The rules must load in `promtool check rules` (Debian's prometheus package,
installed by scripts/install-deps.sh), each with a `for:`, a severity and
advice for the operator; the dashboard must be valid JSON whose queries
parse as PromQL. And every metric either of them names must be one a
running broker really exports: a typo, or a metric renamed in the broker,
would otherwise give an alert that can never fire or an empty panel. The
names are taken from the PromQL by a rough tokenizer (metric_names below):
every identifier that is not a function, keyword or grouping label must be
a `sluice_` metric found on a broker's /metrics, with the label values its
selectors ask for. The brokers are a two-broker cluster (the controller and
replication figures exist only in a cluster) with a replicated topic that
holds data and a group that committed an offset, so that the per-partition,
per-replica and per-group series exist.
"""

import json
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_harness import Cluster

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "sluice-rules.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "sluice-dashboard.json"

# Labels Prometheus adds to every scraped series; the broker does not export them.
TARGET_LABELS = {"instance", "job"}

# ---------------------------------------------------------------- PromQL, roughly

FUNCTIONS = {
    "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "avg_over_time",
    "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh", "count_over_time", "day_of_month",
    "day_of_week", "day_of_year", "days_in_month", "deg", "delta", "deriv", "exp", "floor", "histogram_count",
    "histogram_fraction", "histogram_quantile", "histogram_sum", "holt_winters", "hour", "idelta", "increase",
    "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2", "max_over_time",
    "min_over_time", "minute", "month", "pi", "predict_linear", "present_over_time", "quantile_over_time",
    "rad", "rate", "resets", "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_desc", "sqrt",
    "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan", "tanh", "time", "timestamp", "vector",
    "year",
    # aggregation operators
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile",
}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<number>0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:ms|[smhdwy])?(?:\d+(?:ms|[smhdwy]))*)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<var>\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=,(){}\[\]@])
""", re.X)


def tokens(expr):
    pos, out = 0, []
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            raise ValueError(f"cannot read PromQL at {expr[pos:pos + 20]!r} in {expr!r}")
        pos = m.end()
        if m.lastgroup not in ("space", "comment"):
            out.append((m.lastgroup, m.group()))
    return out


def _unquote(s):
    return s[1:-1].encode().decode("unicode_escape") if s[0] != "`" else s[1:-1]


def parse_promql(expr):
    """Returns (selectors, grouping_labels): selectors as (metric, [(label,
    op, value)]) for every metric a PromQL expression names, and the label
    names of its by/without/on/ignoring/group_left/group_right clauses.
    Raises ValueError for an identifier it cannot place: a misspelt
    function, keyword or anything that is neither."""
    toks = tokens(expr)
    selectors, grouping = [], set()
    i, depth_square = 0, 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1][1] if i + 1 < len(toks) else None
        if text == "[":
            depth_square += 1
        elif text == "]":
            depth_square -= 1
        elif kind == "ident" and depth_square == 0:
            low = text.lower()
            if low in GROUPING:
                # by (a, b): label names, not metrics. group_left may come without a list.
                if nxt == "(":
                    j = i + 2
                    while toks[j][1] != ")":
                        if toks[j][0] == "ident":
                            grouping.add(toks[j][1])
                        j += 1
                    i = j
            elif nxt == "(" or (nxt or "").lower() in ("by", "without"):  # sum by (x) (...)
                if text not in FUNCTIONS:
                    raise ValueError(f"unknown function {text!r} in {expr!r}")
            elif low in KEYWORDS:
                pass
            else:
                matchers = []
                if nxt == "{":
                    j = i + 2
                    while toks[j][1] != "}":
                        if toks[j][0] == "ident":
                            label, op, value = toks[j][1], toks[j + 1][1], toks[j + 2]
                            if value[0] != "string":
                                raise ValueError(f"matcher {label}{op} without a string in {expr!r}")
                            matchers.append((label, op, _unquote(value[1])))
                            j += 3
                        else:
                            j += 1
                    i = j
                selectors.append((text, matchers))
        elif text == "{" and depth_square == 0:
            raise ValueError(f"a selector without a metric name in {expr!r}")
        i += 1
    return selectors, grouping


def test_the_promql_reader_finds_metrics_and_only_metrics():
    sel, grouping = parse_promql(
        'histogram_quantile(0.99, sum by (instance, le) (rate(sluice_x_bucket{api="produce",'
        'instance=~"$instance"}[$__rate_interval]))) > 1e3 * 5 and on(instance) sluice_y offset 5m '
        'or sluice_z < +Inf # a comment naming not_a_metric\n')
    assert [s[0] for s in sel] == ["sluice_x_bucket", "sluice_y", "sluice_z"]
    assert sel[0][1] == [("api", "=", "produce"), ("instance", "=~", "$instance")]
    assert grouping == {"instance", "le"}
    with pytest.raises(ValueError):
        parse_promql("rte(sluice_x[5m])")  # a misspelt function
    with pytest.raises(ValueError):
        parse_promql('{__name__="sluice_x"}')


# ---------------------------------------------------------------- the files

def rules():
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def dashboard_panels():
    def walk(panels):
        for p in panels:
            yield p
            yield from walk(p.get("panels", []))
    return list(walk(json.loads(DASHBOARD.read_text())["panels"]))


def dashboard_exprs():
    """Every PromQL query of the dashboard's panels."""
    return [t["expr"] for p in dashboard_panels() for t in p.get("targets", [])]


def dashboard_label_values():
    """(metric, label) of each `label_values(metric, label)` template variable."""
    out = []
    for v in json.loads(DASHBOARD.read_text())["templating"]["list"]:
        if v["type"] != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)", q)
        assert m, f"variable {v['name']}: a query the test cannot read: {q!r}"
        out.append((m.group(1), m.group(2)))
    return out


def promtool():
    path = shutil.which("promtool")
    assert path, "promtool is missing: scripts/install-deps.sh installs Debian's prometheus package, which has it"
    return path


def test_promtool_checks_the_rules():
    r = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(rules())} rules found" in r.stdout


def test_every_rule_waits_names_a_severity_and_tells_what_to_do():
    names = set()
    for r in rules():
        assert "alert" in r, f"a recording rule in an alerting file: {r}"
        assert r["alert"] not in names, f"two alerts named {r['alert']}"
        names.add(r["alert"])
        assert "for" in r, f"{r['alert']} has no for:"
        assert r.get("labels", {}).get("severity") in ("warning", "critical"), r["alert"]
        ann = r.get("annotations", {})
        assert ann.get("summary") and len(ann.get("description", "")) > 80, f"{r['alert']} gives no advice"


def test_the_rules_cover_what_the_brief_says_to_watch():
    watched = {
        "lag against retention": "sluice_group_retention_headroom_seconds",
        "under min ISR": "sluice_under_min_isr_partitions",
        "under-replicated": "sluice_under_replicated_partitions",
        "ISR shrinks": "sluice_isr_shrinks_total",
        "produce p99": "sluice_request_latency_seconds_bucket",
        "disk against retention": "sluice_log_retention_projected_bytes",
        "controller changes": "sluice_controller_changes_total",
    }
    for what, metric in watched.items():
        for exprs in ([r["expr"] for r in rules()], dashboard_exprs()):
            assert any(metric in {s[0] for s in parse_promql(e)[0]} for e in exprs), what


def test_the_dashboard_is_grafana_json_over_a_datasource_variable():
    d = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dashboard_panels()]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for p in dashboard_panels():
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["fieldConfig"]["defaults"].get("unit"), f"panel {p['title']!r} has no unit"
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]


def test_the_dashboards_queries_are_promql(tmp_path):
    # promtool checks PromQL only inside rule files: each query becomes a
    # recording rule, with Grafana's variables given plain values.
    subst = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "$instance": ".*"}
    rules_doc = {"groups": [{"name": "dashboard", "rules": []}]}
    for n, e in enumerate(dashboard_exprs()):
        for k, v in subst.items():
            e = e.replace(k, v)
        assert "$" not in e, f"a dashboard variable the test does not know: {e}"
        rules_doc["groups"][0]["rules"].append({"record": f"sluice_dashboard:q{n}", "expr": e})
    f = tmp_path / "dashboard-queries.yml"
    f.write_text(yaml.safe_dump(rules_doc))
    r = subprocess.run([promtool(), "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


# ---------------------------------------------------------------- against brokers

def scrape(port):
    """{metric: [labels dict, ...]} of one /metrics page."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$", line)
        assert m, f"unreadable /metrics line {line!r}"
        labels = dict((k, _unquote('"' + v + '"')) for k, v in
                      re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        series.setdefault(m.group(1), []).append(labels)
    return series


def check_exported(expr, exported, where):
    """Problems with `expr` against the union of the brokers' series."""
    problems = []
    selectors, grouping = parse_promql(expr)
    for metric, matchers in selectors:
        if not metric.startswith("sluice_"):
            problems.append(f"{where}: {metric!r} is not a Sluice metric")
            continue
        if metric not in exported:
            problems.append(f"{where}: {metric} is not exported")
            continue
        for label, op, value in matchers:
            if label in TARGET_LABELS:
                continue
            have = [s[label] for s in exported[metric] if label in s]
            if not have:
                problems.append(f"{where}: {metric} has no label {label!r}")
            elif op == "=" and "$" not in value and value not in have:
                problems.append(f"{where}: {metric} has no series with {label}={value!r} (has {sorted(set(have))})")
    known = TARGET_LABELS | {l for m, _ in selectors for s in exported.get(m, []) for l in s}
    for label in grouping - known:
        problems.append(f"{where}: grouping label {label!r} is on none of its metrics")
    return problems


def templated_labels(text):
    """Label names an annotation ({{ $labels.x }}) or a legend ({{x}}) uses."""
    return set(re.findall(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)", text)) | \
        set(re.findall(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", text))


def produce_and_commit(bootstrap, topic, group):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(40):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 5)], asynchronous=False)
    c.close()


def test_every_metric_the_rules_and_dashboard_name_is_exported():
    with Cluster(brokers=2, etcd=1) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        for f in admin.create_topics([NewTopic("watched", 2, 2)]).values():
            f.result(timeout=30)
        produce_and_commit(c.bootstrap, "watched", "watchers")

        def union():
            u = {}
            for n in c.node_ids:
                for metric, series in scrape(c.broker(n).metrics_port).items():
                    u.setdefault(metric, []).extend(series)
            return u

        # Per-replica figures appear once followers have fetched, the group's
        # once its offsets are in the coordinator.
        deadline = time.monotonic() + 30
        while True:
            exported = union()
            if ("sluice_replica_lag_ms" in exported and "sluice_group_retention_headroom_seconds" in exported
                    and any(s.get("api") == "produce" for s in exported.get("sluice_request_latency_seconds_bucket", []))):
                break
            assert time.monotonic() < deadline, "the replicated topic's and the group's series did not appear"
            time.sleep(0.5)

    problems = []
    for r in rules():
        problems += check_exported(r["expr"], exported, f"rule {r['alert']}")
        sel, grouping = parse_promql(r["expr"])
        labels = TARGET_LABELS | grouping | {l for m, _ in sel for s in exported.get(m, []) for l in s}
        for text in r.get("annotations", {}).values():
            for label in templated_labels(text) - labels:
                problems.append(f"rule {r['alert']}: annotation names label {label!r}, on none of its metrics")
    for p in dashboard_panels():
        for t in p.get("targets", []):
            problems += check_exported(t["expr"], exported, f"panel {p['title']!r}")
            sel, grouping = parse_promql(t["expr"])
            labels = TARGET_LABELS | grouping | {l for m, _ in sel for s in exported.get(m, []) for l in s}
            for label in templated_labels(t.get("legendFormat", "")) - labels:
                problems.append(f"panel {p['title']!r}: legend names label {label!r}, on none of its metrics")
    for metric, label in dashboard_label_values():
        if metric not in exported:
            problems.append(f"dashboard variable: {metric} is not exported")
        elif label not in TARGET_LABELS and not any(label in s for s in exported[metric]):
            problems.append(f"dashboard variable: {metric} has no label {label!r}")
    assert not problems, "\n".join(problems)
