"""Checks of meshlb's API through Cloudflare's official Python SDK (tests/sdk.rs runs one per
trial: `python checks.py CHECK`). The client validates every answer strictly against the SDK's
models and does not retry, so a shape or status the SDK does not expect fails the check.

Environment: MESHLB_API (the base URL, ending in /client/v4), MESHLB_TOKEN (the write token),
MESHLB_ORIGIN_ADDRESS and MESHLB_ORIGIN_PORT (an origin that answers 200, and 404 on
/missing), MESHLB_ZONE (a zone of the config).
"""

import os
import sys
import time

import cloudflare
import httpx
from cloudflare import Cloudflare

API = os.environ["MESHLB_API"]
TOKEN = os.environ["MESHLB_TOKEN"]
ORIGIN = os.environ["MESHLB_ORIGIN_ADDRESS"]
PORT = int(os.environ["MESHLB_ORIGIN_PORT"])
ZONE = os.environ["MESHLB_ZONE"]
ACCOUNT = "023e105f4ecef8ad9ca31a8372d0c353"


def client(**kw):
    return Cloudflare(
        api_token=kw.pop("token", TOKEN),
        base_url=API,
        _strict_response_validation=True,
        max_retries=kw.pop("max_retries", 0),
        **kw,
    )


cf = client()
lbs = cf.load_balancers


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def monitor(name, **fields):
    body = dict(type="http", path="/", expected_codes="2xx", interval=2, retries=0,
                description=name, allow_insecure=True)
    body.update(fields)
    return lbs.monitors.create(account_id=ACCOUNT, extra_body={"timeout": 1}, **body)


def pool(name, monitor_id, **fields):
    return lbs.pools.create(
        account_id=ACCOUNT, name=name, monitor=monitor_id,
        origins=[{"name": "a", "address": ORIGIN, "port": PORT, "weight": 1}], **fields)


def monitors_are_created_read_replaced_patched_listed_and_deleted():
    m = monitor("py monitor crud")
    check(lbs.monitors.get(m.id, account_id=ACCOUNT).description == "py monitor crud", "get")
    r = lbs.monitors.update(m.id, account_id=ACCOUNT, type="http", path="/ready",
                            expected_codes="200", interval=10, description="replaced")
    check(r.path == "/ready" and r.interval == 10, f"update: {r}")
    e = lbs.monitors.edit(m.id, account_id=ACCOUNT, description="patched")
    check(e.description == "patched" and e.path == "/ready", f"edit: {e}")
    check(m.id in [x.id for x in lbs.monitors.list(account_id=ACCOUNT)], "list")
    lbs.monitors.delete(m.id, account_id=ACCOUNT)
    try:
        lbs.monitors.get(m.id, account_id=ACCOUNT)
        raise AssertionError("the deleted monitor is still there")
    except cloudflare.NotFoundError:
        pass


def pools_are_created_read_replaced_patched_listed_and_deleted():
    m = monitor("py pool crud")
    p = pool("py-pool-crud", m.id, notification_email="ops@example.com",
             notification_filter={"pool": {"healthy": False}, "origin": {"disable": True}})
    check(p.notification_email == "ops@example.com", f"notification_email: {p}")
    check(p.notification_filter.pool.healthy is False, f"notification_filter: {p}")
    check(p.notification_filter.origin.disable is True, f"notification_filter: {p}")
    check(lbs.pools.get(p.id, account_id=ACCOUNT).origins[0].address == ORIGIN, "get")
    u = lbs.pools.update(p.id, account_id=ACCOUNT, name=p.id, monitor=m.id, minimum_origins=1,
                         origins=[{"name": "b", "address": ORIGIN, "port": PORT}])
    check([o.name for o in u.origins] == ["b"], f"update: {u}")
    e = lbs.pools.edit(p.id, account_id=ACCOUNT, description="patched")
    check(e.description == "patched" and e.origins[0].name == "b", f"edit: {e}")
    check(p.id in [x.id for x in lbs.pools.list(account_id=ACCOUNT)], "list")
    lbs.pools.delete(p.id, account_id=ACCOUNT)
    lbs.monitors.delete(m.id, account_id=ACCOUNT)


def pools_listed_by_monitor_are_the_ones_that_use_it():
    m = monitor("py filter")
    other = monitor("py filter other")
    pool("py-filter-mine", m.id)
    pool("py-filter-other", other.id)
    listed = [x.id for x in lbs.pools.list(account_id=ACCOUNT, monitor=m.id)]
    check(listed == ["py-filter-mine"], f"pools?monitor=: {listed}")


def a_bulk_patch_clears_every_pools_notification_email():
    m = monitor("py bulk")
    pool("py-bulk", m.id, notification_email="ops@example.com")
    pools = list(lbs.pools.bulk_edit(account_id=ACCOUNT, notification_email=""))
    check(any(p.id == "py-bulk" for p in pools), f"the bulk answer lists every pool: {pools}")
    check(all(p.notification_email is None for p in pools), f"cleared: {pools}")
    check(lbs.pools.get("py-bulk", account_id=ACCOUNT).notification_email is None, "get")


def load_balancers_are_created_read_patched_listed_and_deleted():
    m = monitor("py lb")
    pool("py-lb-pool", m.id)
    name = f"py-lb.{ZONE}"
    lb = lbs.create(zone_id=ZONE, name=name, default_pools=["py-lb-pool"],
                    fallback_pool="py-lb-pool", steering_policy="off", ttl=30)
    check(lb.id == name and lb.default_pools == ["py-lb-pool"], f"create: {lb}")
    check(lbs.get(name, zone_id=ZONE).fallback_pool == "py-lb-pool", "get")
    e = lbs.edit(name, zone_id=ZONE, description="patched")
    check(e.description == "patched", f"edit: {e}")
    check(name in [x.id for x in lbs.list(zone_id=ZONE)], "list")
    lbs.delete(name, zone_id=ZONE)


def monitor_groups_are_created_read_and_deleted():
    a = monitor("py group a")
    b = monitor("py group b")
    g = lbs.monitor_groups.create(
        account_id=ACCOUNT, description="py group",
        members=[{"monitor_id": a.id, "enabled": True, "monitoring_only": False,
                  "must_be_healthy": True},
                 {"monitor_id": b.id, "enabled": True, "monitoring_only": True,
                  "must_be_healthy": False}])
    check(len(lbs.monitor_groups.get(g.id, account_id=ACCOUNT).members) == 2, "get")
    refs = list(lbs.monitor_groups.references.get(g.id, account_id=ACCOUNT))
    check({r.resource_id for r in refs} == {a.id, b.id}, f"references: {refs}")
    lbs.monitor_groups.delete(g.id, account_id=ACCOUNT)


def references_of_monitors_and_pools_name_both_directions():
    m = monitor("py references")
    pool("py-refs", m.id)
    lbs.create(zone_id=ZONE, name=f"py-refs.{ZONE}", default_pools=["py-refs"],
               fallback_pool="py-refs")
    refs = list(lbs.monitors.references.get(m.id, account_id=ACCOUNT))
    check([(r.reference_type, r.resource_type, r.resource_id) for r in refs]
          == [("referrer", "pool", "py-refs")], f"monitor references: {refs}")
    refs = {(r.reference_type, r.resource_type, r.resource_id)
            for r in lbs.pools.references.get("py-refs", account_id=ACCOUNT)}
    check(refs == {("referral", "monitor", m.id),
                   ("referrer", "load_balancer", f"py-refs.{ZONE}")}, f"pool references: {refs}")


def search_finds_resources_with_their_references():
    m = monitor("py searched")
    pool("py-searched", m.id)
    pages = list(lbs.searches.list(account_id=ACCOUNT, query="py-searched", references="*"))
    found = [r for page in pages for r in page.resources]
    check([(r.resource_type, r.resource_id) for r in found] == [("pool", "py-searched")],
          f"search: {found}")
    check(found[0].references[0]["resource_id"] == m.id, f"references: {found}")


def preview(preview_id, pool_id, origins):
    """The preview's answer once `origins` origins of `pool_id` are in (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        result = lbs.previews.get(preview_id, account_id=ACCOUNT)
        got = result.get(pool_id)
        if got is not None and len(got.origins or []) >= origins:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"no outcome of preview {preview_id} in 30 s: {result}")
        time.sleep(0.2)


def a_monitor_preview_reports_each_origin_as_the_probers_saw_it():
    m = monitor("py preview")
    pool("py-preview", m.id)
    created = lbs.monitors.previews.create(
        m.id, account_id=ACCOUNT, type="http", path="/missing", expected_codes="2xx",
        interval=2, extra_body={"timeout": 1})
    check(created.pools == {"py-preview": "py-preview"}, f"pools: {created}")
    got = preview(created.preview_id, "py-preview", 1)
    origin = got.origins[0][ORIGIN]
    check(got.healthy is False and origin.healthy is False, f"unhealthy: {got}")
    check(origin.response_code == 404, f"the code: {got}")
    check("404" in (origin.failure_reason or ""), f"the reason: {got}")
    check(lbs.monitors.get(m.id, account_id=ACCOUNT).path == "/", "the monitor is unchanged")


def a_pool_preview_reports_its_origins_healthy():
    m = monitor("py pool preview", path="/missing")
    pool("py-pool-preview", m.id)
    created = lbs.pools.health.create("py-pool-preview", account_id=ACCOUNT, type="http",
                                      path="/", expected_codes="2xx")
    got = preview(created.preview_id, "py-pool-preview", 1)
    origin = got.origins[0][ORIGIN]
    check(got.healthy is True and origin.healthy is True, f"healthy: {got}")
    check(origin.rtt is not None and origin.rtt.endswith("ms"), f"rtt: {got}")


def pool_health_answers_per_region():
    m = monitor("py health")
    pool("py-health", m.id, extra_body={"check_regions": ["WEU"]})
    health = lbs.pools.health.get("py-health", account_id=ACCOUNT)
    check(health.pool_id == "py-health", f"health: {health}")
    check(health.pop_health is not None, f"pop_health: {health}")


def regions_list_their_countries():
    listed = lbs.regions.list(account_id=ACCOUNT, country_code_a2="FR")
    check([r["region_code"] for r in listed["regions"]] == ["WEU"], f"FR's region: {listed}")
    weu = lbs.regions.get("WEU", account_id=ACCOUNT)
    codes = [c["country_code_a2"] for c in weu["regions"][0]["countries"]]
    check("FR" in codes and "JP" not in codes, f"WEU's countries: {weu}")


def errors_are_typed_with_the_envelopes_errors():
    try:
        lbs.pools.get("py-no-such-pool", account_id=ACCOUNT)
        raise AssertionError("a missing pool was found")
    except cloudflare.NotFoundError as e:
        check(e.body["errors"][0]["code"] == 1001, f"404: {e.body}")
    try:
        lbs.monitors.create(account_id=ACCOUNT, type="http", extra_body={"zebra": 1})
        raise AssertionError("an unknown field was accepted")
    except cloudflare.BadRequestError as e:
        check(e.body["errors"][0]["source"]["pointer"] == "/zebra", f"400: {e.body}")
    try:
        client(token="wrong").load_balancers.pools.list(account_id=ACCOUNT)
        raise AssertionError("a wrong token was let in")
    except cloudflare.AuthenticationError as e:
        check(e.body["errors"][0]["code"] == 1005, f"401: {e.body}")
    try:
        cf.get(f"/accounts/{ACCOUNT}/load_balancers/zebras", cast_to=httpx.Response)
        raise AssertionError("an unknown path was served")
    except cloudflare.NotFoundError as e:
        check("serves" in e.body["errors"][0]["message"], f"unknown path: {e.body}")


def a_conflict_is_not_retried():
    requests = []
    counting = httpx.Client(event_hooks={"request": [requests.append]})
    retrying = client(max_retries=2, http_client=counting)
    m = monitor("py conflict")
    pool("py-conflict", m.id)
    try:
        retrying.load_balancers.pools.create(
            account_id=ACCOUNT, name="py-conflict",
            origins=[{"name": "a", "address": ORIGIN, "port": PORT}])
        raise AssertionError("a second pool of the same id was created")
    except cloudflare.ConflictError as e:
        check(e.body["errors"][0]["code"] == 1006, f"409: {e.body}")
    check(len(requests) == 1, f"the conflict was sent {len(requests)} times")


def private_networks_are_made_and_a_pool_endpoint_in_one_reads_back():
    zt = cf.zero_trust
    t = zt.tunnels.cloudflared.create(account_id=ACCOUNT, name="py-office", config_src="local")
    check(t.id and t.name == "py-office" and t.tun_type == "cfd_tunnel", f"tunnel: {t}")
    check(t.status == "inactive", f"a tunnel no connector ever ran is inactive: {t.status}")
    check(t.id in [x.id for x in zt.tunnels.cloudflared.list(account_id=ACCOUNT)], "listed")
    token = zt.tunnels.cloudflared.token.get(t.id, account_id=ACCOUNT)
    check(isinstance(token, str) and len(token) > 40, f"token: {token!r}")
    n = zt.networks.virtual_networks.create(account_id=ACCOUNT, name="py-office-net",
                                            comment="the office", is_default_network=False)
    check(n.comment == "the office" and not n.is_default_network, f"network: {n}")
    r = zt.networks.routes.create(account_id=ACCOUNT, network="10.20.0.0/16", tunnel_id=t.id,
                                  virtual_network_id=n.id, comment="office LAN")
    check(r.network == "10.20.0.0/16" and r.tunnel_id == t.id, f"route: {r}")
    listed = [x for x in zt.networks.routes.list(account_id=ACCOUNT) if x.id == r.id]
    check(listed and listed[0].tunnel_name == "py-office"
          and listed[0].virtual_network_name == "py-office-net", f"routes: {listed}")
    p = lbs.pools.create(account_id=ACCOUNT, name="py-private", origins=[
        {"name": "app", "address": "10.20.1.5", "port": 8080, "virtual_network_id": n.id}])
    got = lbs.pools.get(p.id, account_id=ACCOUNT)
    check(got.origins[0].virtual_network_id == n.id, f"virtual_network_id: {got.origins}")
    # Outside every route of its network: refused, with the field's path.
    try:
        lbs.pools.create(account_id=ACCOUNT, name="py-unrouted", origins=[
            {"name": "app", "address": "10.99.1.5", "virtual_network_id": n.id}])
        raise AssertionError("an unrouted private endpoint was written")
    except cloudflare.BadRequestError as e:
        check("no route" in str(e.body), f"400: {e.body}")
    # What a route or a pool still names is not deleted.
    try:
        zt.tunnels.cloudflared.delete(t.id, account_id=ACCOUNT)
        raise AssertionError("a routed tunnel was deleted")
    except cloudflare.BadRequestError:
        pass
    lbs.pools.delete(p.id, account_id=ACCOUNT)
    zt.networks.routes.delete(r.id, account_id=ACCOUNT)
    zt.networks.virtual_networks.delete(n.id, account_id=ACCOUNT)
    gone = zt.tunnels.cloudflared.delete(t.id, account_id=ACCOUNT)
    check(gone.deleted_at is not None, f"deleted: {gone}")
    try:
        zt.tunnels.cloudflared.get(t.id, account_id=ACCOUNT)
        raise AssertionError("the deleted tunnel is still there")
    except cloudflare.NotFoundError:
        pass


if __name__ == "__main__":
    globals()[sys.argv[1]]()
