#!/usr/bin/env python3
"""Writes meshlb's Grafana dashboards (JSON, schema 39) next to this script.

Edit here and rerun; tests/deploy.rs checks that every metric the dashboards query is one
meshlb really exports. Import the JSON files in Grafana (Dashboards -> Import) and pick your
Prometheus data source for DS_PROMETHEUS.
"""
import json
import os

DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}


def target(expr, legend="", fmt="time_series", instant=False, ref="A"):
    t = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}
    if fmt != "time_series":
        t["format"] = fmt
    if instant:
        t["instant"] = True
        t["range"] = False
    return t


class Board:
    def __init__(self, uid, title, description, variables=()):
        self.uid, self.title, self.description = uid, title, description
        self.panels, self.y, self.next_id = [], 0, 1
        self.variables = list(variables)

    def row(self, title):
        self.panels.append({"type": "row", "title": title, "id": self.next_id, "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.next_id += 1
        self.y += 1
        self.x = 0

    def panel(self, kind, title, targets, w=12, h=8, unit=None, description="", options=None,
              field_config=None):
        if getattr(self, "x", 0) + w > 24:
            self.x = 0
            self.y += h
        fc = field_config or {"defaults": {}, "overrides": []}
        if unit:
            fc["defaults"]["unit"] = unit
        self.panels.append({"type": kind, "title": title, "id": self.next_id, "datasource": DS,
                            "description": description, "targets": targets,
                            "gridPos": {"h": h, "w": w, "x": getattr(self, "x", 0), "y": self.y},
                            "fieldConfig": fc, "options": options or {}})
        self.next_id += 1
        self.x = getattr(self, "x", 0) + w
        if self.x >= 24:
            self.x = 0
            self.y += h

    def write(self, path):
        templating = [{"name": "DS_PROMETHEUS", "type": "datasource", "query": "prometheus",
                       "label": "Prometheus"}] + self.variables
        board = {"uid": self.uid, "title": self.title, "description": self.description,
                 "tags": ["meshlb"], "schemaVersion": 39, "version": 1, "editable": True,
                 "time": {"from": "now-1h", "to": "now"}, "refresh": "30s",
                 "templating": {"list": templating}, "panels": self.panels}
        with open(path, "w") as f:
            json.dump(board, f, indent=2, sort_keys=True)
            f.write("\n")


def query_var(name, query, label):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": name}, "refresh": 2, "includeAll": True,
            "multi": True, "current": {"text": "All", "value": "$__all"}}


def mesh():
    b = Board("meshlb-mesh", "meshlb / mesh overview",
              "The probe mesh: live probers on the map of regions, membership, gossip, the tally.")
    b.row("Regions")
    b.panel("geomap", "Live probers by region", [target(
        'sum by (region) (meshlb_mesh_members{role="prober", state="live"})'
        ' * on (region) group_left (latitude, longitude, name) max by (region, latitude, longitude, name) (meshlb_region_info)',
        fmt="table", instant=True)], w=16, h=12,
        description="Each region at its representative point, sized and coloured by live probers (3 = every datacenter).",
        options={"view": {"id": "zero", "zoom": 1},
                 "layers": [{"type": "markers", "name": "regions",
                             "location": {"mode": "coords", "latitude": "latitude", "longitude": "longitude"},
                             "config": {"showLegend": True,
                                        "size": {"field": "Value", "min": 4, "max": 16, "fixed": 8},
                                        "color": {"field": "Value"}}}]},
        field_config={"defaults": {"color": {"mode": "thresholds"},
                                   "thresholds": {"mode": "absolute", "steps": [
                                       {"color": "red", "value": None}, {"color": "orange", "value": 1},
                                       {"color": "green", "value": 2}]}}, "overrides": []})
    b.panel("table", "Members by region", [target(
        'sum by (role, region, state) (meshlb_mesh_members)', fmt="table", instant=True)], w=8, h=12)
    b.row("Tally")
    b.panel("timeseries", "Health changes", [target(
        'sum by (kind) (increase(meshlb_health_changes_total[$__rate_interval]))', "{{kind}}")], w=8)
    b.panel("timeseries", "Votes counted per tally", [target('max by (instance) (meshlb_tally_votes)', "{{instance}}")], w=8)
    b.panel("timeseries", "Tally duration p99", [target(
        'histogram_quantile(0.99, sum by (le, instance) (rate(meshlb_tally_duration_seconds_bucket[$__rate_interval])))',
        "{{instance}}")], w=8, unit="s")
    b.panel("stat", "Aggregators in fail-static", [target('sum(meshlb_fail_static)')], w=6, h=5)
    b.panel("stat", "Members on another config", [target('max(meshlb_config_drift_members)')], w=6, h=5)
    b.panel("stat", "Rejected gossip packets (5m)", [target('sum(increase(meshlb_gossip_rejected_packets_total[5m]))')], w=6, h=5)
    b.panel("stat", "Notifications given up (1h)", [target('sum(increase(meshlb_notifications_total{result="failed"}[1h]))')], w=6, h=5)
    b.row("Configuration")
    b.panel("stat", "Nodes whose last reload was refused", [target(
        'count(meshlb_config_last_reload_successful == 0) or vector(0)')], w=6, h=5,
        description="A refused file leaves the node on its previous config; the errors are in its log.")
    b.panel("timeseries", "Config reloads", [target(
        'sum by (result) (increase(meshlb_config_reloads_total[$__rate_interval]))', "{{result}}")], w=9, h=5)
    b.panel("timeseries", "Config age", [target(
        'time() - max by (instance) (meshlb_config_last_reload_success_timestamp_seconds)', "{{instance}}")],
        w=9, h=5, unit="s", description="Since each node loaded the config it runs.")
    b.row("Gossip")
    b.panel("timeseries", "Gossip bytes/s", [
        target('sum by (instance) (rate(meshlb_gossip_sent_bytes_total[$__rate_interval]))', "sent {{instance}}"),
        target('sum by (instance) (rate(meshlb_gossip_received_bytes_total[$__rate_interval]))', "received {{instance}}", ref="B")],
        unit="Bps")
    b.panel("timeseries", "Gossip datagrams/s", [
        target('sum(rate(meshlb_gossip_sent_datagrams_total[$__rate_interval]))', "sent"),
        target('sum(rate(meshlb_gossip_received_datagrams_total[$__rate_interval]))', "received", ref="B"),
        target('sum(rate(meshlb_gossip_fragmented_messages_total[$__rate_interval]))', "fragmented", ref="C")])
    return b


def pools():
    b = Board("meshlb-pools", "meshlb / pools and endpoints",
              "Health of pools and endpoints as the aggregators see it, RTT from each region, probe outcomes.",
              [query_var("pool", "label_values(meshlb_pool_state, pool)", "Pool")])
    b.row("Health")
    b.panel("table", "Pool state", [target(
        'max by (pool, state) (meshlb_pool_state{pool=~"$pool"}) == 1', fmt="table", instant=True)], w=8, h=9)
    b.panel("table", "Unhealthy or unknown endpoints", [target(
        'max by (pool, endpoint, state) (meshlb_endpoint_state{pool=~"$pool", state!="healthy"}) == 1',
        fmt="table", instant=True)], w=8, h=9)
    b.panel("table", "Load balancers", [target(
        'max by (load_balancer, state) (meshlb_load_balancer_state) == 1', fmt="table", instant=True)], w=8, h=9)
    b.panel("state-timeline", "Endpoints healthy over time", [target(
        'max by (pool, endpoint) (meshlb_endpoint_state{pool=~"$pool", state="healthy"})', "{{pool}}/{{endpoint}}")],
        w=24, h=10)
    b.row("Latency (EWMA RTT from each region)")
    b.panel("timeseries", "Pool RTT by region", [target(
        'max by (pool, region) (meshlb_pool_rtt_seconds{pool=~"$pool"})', "{{pool}} from {{region}}")], unit="s")
    b.panel("timeseries", "Endpoint RTT by region", [target(
        'max by (pool, endpoint, region) (meshlb_endpoint_rtt_seconds{pool=~"$pool"})',
        "{{endpoint}} from {{region}}")], unit="s")
    b.row("Probes")
    b.panel("timeseries", "Probe failures by reason", [target(
        'sum by (type, reason) (rate(meshlb_probes_total{result="fail"}[$__rate_interval]))', "{{type}} {{reason}}")])
    b.panel("timeseries", "Probe duration p50 / p99 by type", [
        target('histogram_quantile(0.5, sum by (le, type) (rate(meshlb_probe_duration_seconds_bucket[$__rate_interval])))', "p50 {{type}}"),
        target('histogram_quantile(0.99, sum by (le, type) (rate(meshlb_probe_duration_seconds_bucket[$__rate_interval])))', "p99 {{type}}", ref="B")],
        unit="s")
    b.panel("timeseries", "Probes/s by region", [target(
        'sum by (node_region) (rate(meshlb_probes_total[$__rate_interval]))', "{{node_region}}")])
    b.panel("timeseries", "Retries and overruns", [
        target('sum(rate(meshlb_probe_retries_total[$__rate_interval]))', "retries"),
        target('sum(rate(meshlb_probe_overruns_total[$__rate_interval]))', "overruns", ref="B")])
    return b


def traffic():
    b = Board("meshlb-traffic", "meshlb / DNS, proxy and layer-4 traffic",
              "Queries answered by the authoritative DNS server, requests through the HTTP proxy, "
              "connections and flows through layer-4 load balancers.")
    b.row("DNS")
    b.panel("timeseries", "Queries/s by load balancer", [target(
        'sum by (load_balancer) (rate(meshlb_dns_queries_total[$__rate_interval]))', "{{load_balancer}}")], unit="reqps")
    b.panel("timeseries", "Queries/s by rcode", [target(
        'sum by (rcode) (rate(meshlb_dns_queries_total[$__rate_interval]))', "{{rcode}}")], unit="reqps")
    b.panel("timeseries", "Answer time p50 / p99", [
        target('histogram_quantile(0.5, sum by (le) (rate(meshlb_dns_answer_duration_seconds_bucket[$__rate_interval])))', "p50"),
        target('histogram_quantile(0.99, sum by (le) (rate(meshlb_dns_answer_duration_seconds_bucket[$__rate_interval])))', "p99", ref="B")],
        unit="s")
    b.panel("timeseries", "Queries/s by type", [target(
        'sum by (qtype) (rate(meshlb_dns_queries_total[$__rate_interval]))', "{{qtype}}")], unit="reqps")
    b.row("HTTP proxy")
    b.panel("timeseries", "Requests/s by status class", [target(
        'sum by (status_class) (rate(meshlb_proxy_requests_total[$__rate_interval]))', "{{status_class}}")], unit="reqps")
    b.panel("timeseries", "Requests/s by endpoint", [target(
        'sum by (load_balancer, pool, endpoint) (rate(meshlb_proxy_requests_total[$__rate_interval]))',
        "{{load_balancer}} {{pool}}/{{endpoint}}")], unit="reqps")
    b.panel("timeseries", "Latency p50 / p99", [
        target('histogram_quantile(0.5, sum by (le, load_balancer) (rate(meshlb_proxy_request_duration_seconds_bucket[$__rate_interval])))', "p50 {{load_balancer}}"),
        target('histogram_quantile(0.99, sum by (le, load_balancer) (rate(meshlb_proxy_request_duration_seconds_bucket[$__rate_interval])))', "p99 {{load_balancer}}", ref="B")],
        unit="s")
    b.panel("timeseries", "Failover retries and affinity hits", [
        target('sum by (load_balancer) (rate(meshlb_proxy_retries_total[$__rate_interval]))', "retries {{load_balancer}}"),
        target('sum by (load_balancer) (rate(meshlb_proxy_affinity_hits_total[$__rate_interval]))', "affinity {{load_balancer}}", ref="B")])
    b.panel("timeseries", "Requests to origins by connection (reused, new, resent)", [target(
        'sum by (connection) (rate(meshlb_proxy_origin_requests_total[$__rate_interval]))', "{{connection}}")],
        unit="reqps")
    b.panel("timeseries", "The proxy's error answers by code", [target(
        'sum by (load_balancer, code) (rate(meshlb_proxy_errors_total[$__rate_interval])) > 0', "{{code}} {{load_balancer}}")],
        unit="reqps", description="Cloudflare's codes: 521 origin refused, 522 connect timed out, 523 unreachable, "
        "524 no answer in time, 525/526 TLS, 530 no pool (error 1016); 502 an answer that broke off.")
    b.row("Layer 4 (TCP and UDP)")
    b.panel("timeseries", "Connections and flows begun/s by load balancer", [target(
        'sum by (load_balancer, transport) (rate(meshlb_l4_accepted_total[$__rate_interval]))',
        "{{load_balancer}} ({{transport}})")], unit="cps")
    b.panel("timeseries", "Bytes/s each way", [target(
        'sum by (load_balancer, direction) (rate(meshlb_l4_bytes_total[$__rate_interval]))',
        "{{load_balancer}} {{direction}}")], unit="Bps")
    b.panel("timeseries", "Open connections and flows by endpoint", [target(
        'sum by (pool, endpoint) (meshlb_l4_endpoint_open)', "{{pool}}/{{endpoint}}")])
    b.panel("timeseries", "Connect failures and retries", [
        target('sum by (pool, endpoint) (rate(meshlb_l4_connect_failures_total[$__rate_interval]))', "failed {{pool}}/{{endpoint}}"),
        target('sum by (load_balancer) (rate(meshlb_l4_retries_total[$__rate_interval]))', "retried {{load_balancer}}", ref="B")],
        description="A refused or timed-out connect is retried once on another endpoint (docs/layer4.md).")
    return b


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    for board in (mesh(), pools(), traffic()):
        board.write(os.path.join(here, board.uid + ".json"))
