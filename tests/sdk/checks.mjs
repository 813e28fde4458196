// Checks of meshlb's API through Cloudflare's official TypeScript SDK (tests/sdk.rs runs one per
// trial: `node checks.mjs CHECK`), the same checks as checks.py. The client does not retry, so a
// status the SDK does not expect fails the check; the answers are read through the SDK's types.
//
// Environment: as checks.py (MESHLB_API, MESHLB_TOKEN, MESHLB_ORIGIN_ADDRESS,
// MESHLB_ORIGIN_PORT, MESHLB_ZONE); NODE_PATH-free: run with the SDK's node_modules as the
// working directory's parent (tests/sdk.rs sets it).

import Cloudflare from 'cloudflare';

const API = process.env.MESHLB_API;
const TOKEN = process.env.MESHLB_TOKEN;
const ORIGIN = process.env.MESHLB_ORIGIN_ADDRESS;
const PORT = Number(process.env.MESHLB_ORIGIN_PORT);
const ZONE = process.env.MESHLB_ZONE;
const ACCOUNT = '023e105f4ecef8ad9ca31a8372d0c353';

const client = (options = {}) =>
  new Cloudflare({ apiToken: TOKEN, baseURL: API, maxRetries: 0, ...options });
const cf = client();
const lbs = cf.loadBalancers;

function check(cond, what) {
  if (!cond) throw new Error(what);
}

const show = (v) => JSON.stringify(v);

async function all(page) {
  const out = [];
  for await (const item of page) out.push(item);
  return out;
}

async function expectError(promise, status, what) {
  try {
    await promise;
  } catch (e) {
    check(e.status === status, `${what}: expected ${status}, got ${e.status}: ${e.message}`);
    return e;
  }
  throw new Error(`${what}: expected ${status}, got a success`);
}

const monitor = (name, fields = {}) =>
  lbs.monitors.create({
    account_id: ACCOUNT, type: 'http', path: '/', expected_codes: '2xx', interval: 2,
    timeout: 1, retries: 0, description: name, allow_insecure: true, ...fields,
  });

const pool = (name, monitorId, fields = {}) =>
  lbs.pools.create({
    account_id: ACCOUNT, name, monitor: monitorId,
    origins: [{ name: 'a', address: ORIGIN, port: PORT, weight: 1 }], ...fields,
  });

const checks = {
  async monitors_are_created_read_replaced_patched_listed_and_deleted() {
    const m = await monitor('ts monitor crud');
    check((await lbs.monitors.get(m.id, { account_id: ACCOUNT })).description === 'ts monitor crud', 'get');
    const r = await lbs.monitors.update(m.id, {
      account_id: ACCOUNT, type: 'http', path: '/ready', expected_codes: '200', interval: 10,
      description: 'replaced',
    });
    check(r.path === '/ready' && r.interval === 10, `update: ${show(r)}`);
    const e = await lbs.monitors.edit(m.id, { account_id: ACCOUNT, description: 'patched' });
    check(e.description === 'patched' && e.path === '/ready', `edit: ${show(e)}`);
    check((await all(lbs.monitors.list({ account_id: ACCOUNT }))).some((x) => x.id === m.id), 'list');
    await lbs.monitors.delete(m.id, { account_id: ACCOUNT });
    await expectError(lbs.monitors.get(m.id, { account_id: ACCOUNT }), 404, 'the deleted monitor');
  },

  async pools_are_created_read_replaced_patched_listed_and_deleted() {
    const m = await monitor('ts pool crud');
    const p = await pool('ts-pool-crud', m.id, {
      notification_email: 'ops@example.com',
      notification_filter: { pool: { healthy: false }, origin: { disable: true } },
    });
    check(p.notification_email === 'ops@example.com', `notification_email: ${show(p)}`);
    check(p.notification_filter.pool.healthy === false, `notification_filter: ${show(p)}`);
    check((await lbs.pools.get(p.id, { account_id: ACCOUNT })).origins[0].address === ORIGIN, 'get');
    const u = await lbs.pools.update(p.id, {
      account_id: ACCOUNT, name: p.id, monitor: m.id, minimum_origins: 1,
      origins: [{ name: 'b', address: ORIGIN, port: PORT }],
    });
    check(u.origins.map((o) => o.name).join() === 'b', `update: ${show(u)}`);
    const e = await lbs.pools.edit(p.id, { account_id: ACCOUNT, description: 'patched' });
    check(e.description === 'patched' && e.origins[0].name === 'b', `edit: ${show(e)}`);
    check((await all(lbs.pools.list({ account_id: ACCOUNT }))).some((x) => x.id === p.id), 'list');
    await lbs.pools.delete(p.id, { account_id: ACCOUNT });
    await lbs.monitors.delete(m.id, { account_id: ACCOUNT });
  },

  async pools_listed_by_monitor_are_the_ones_that_use_it() {
    const m = await monitor('ts filter');
    const other = await monitor('ts filter other');
    await pool('ts-filter-mine', m.id);
    await pool('ts-filter-other', other.id);
    const listed = (await all(lbs.pools.list({ account_id: ACCOUNT, monitor: m.id }))).map((p) => p.id);
    check(listed.join() === 'ts-filter-mine', `pools?monitor=: ${show(listed)}`);
  },

  async a_bulk_patch_clears_every_pools_notification_email() {
    const m = await monitor('ts bulk');
    await pool('ts-bulk', m.id, { notification_email: 'ops@example.com' });
    const pools = await all(lbs.pools.bulkEdit({ account_id: ACCOUNT, notification_email: '' }));
    check(pools.some((p) => p.id === 'ts-bulk'), `the bulk answer lists every pool: ${show(pools)}`);
    check(pools.every((p) => p.notification_email === undefined), `cleared: ${show(pools)}`);
  },

  async load_balancers_are_created_read_patched_listed_and_deleted() {
    const m = await monitor('ts lb');
    await pool('ts-lb-pool', m.id);
    const name = `ts-lb.${ZONE}`;
    const lb = await lbs.create({
      zone_id: ZONE, name, default_pools: ['ts-lb-pool'], fallback_pool: 'ts-lb-pool',
      steering_policy: 'off', ttl: 30,
    });
    check(lb.id === name && lb.default_pools.join() === 'ts-lb-pool', `create: ${show(lb)}`);
    check((await lbs.get(name, { zone_id: ZONE })).fallback_pool === 'ts-lb-pool', 'get');
    const e = await lbs.edit(name, { zone_id: ZONE, description: 'patched' });
    check(e.description === 'patched', `edit: ${show(e)}`);
    check((await all(lbs.list({ zone_id: ZONE }))).some((x) => x.id === name), 'list');
    await lbs.delete(name, { zone_id: ZONE });
  },

  async monitor_groups_are_created_read_and_deleted() {
    const a = await monitor('ts group a');
    const b = await monitor('ts group b');
    const g = await lbs.monitorGroups.create({
      account_id: ACCOUNT, description: 'ts group',
      members: [
        { monitor_id: a.id, enabled: true, monitoring_only: false, must_be_healthy: true },
        { monitor_id: b.id, enabled: true, monitoring_only: true, must_be_healthy: false },
      ],
    });
    check((await lbs.monitorGroups.get(g.id, { account_id: ACCOUNT })).members.length === 2, 'get');
    const refs = await all(lbs.monitorGroups.references.get(g.id, { account_id: ACCOUNT }));
    const ids = refs.map((r) => r.resource_id).sort().join();
    check(ids === [a.id, b.id].sort().join(), `references: ${show(refs)}`);
    await lbs.monitorGroups.delete(g.id, { account_id: ACCOUNT });
  },

  async references_of_monitors_and_pools_name_both_directions() {
    const m = await monitor('ts references');
    await pool('ts-refs', m.id);
    await lbs.create({ zone_id: ZONE, name: `ts-refs.${ZONE}`, default_pools: ['ts-refs'], fallback_pool: 'ts-refs' });
    const refs = await all(lbs.monitors.references.get(m.id, { account_id: ACCOUNT }));
    check(show(refs.map((r) => [r.reference_type, r.resource_type, r.resource_id]))
      === show([['referrer', 'pool', 'ts-refs']]), `monitor references: ${show(refs)}`);
    const poolRefs = (await all(lbs.pools.references.get('ts-refs', { account_id: ACCOUNT })))
      .map((r) => `${r.reference_type} ${r.resource_type} ${r.resource_id}`).sort();
    check(show(poolRefs) === show([`referral monitor ${m.id}`, `referrer load_balancer ts-refs.${ZONE}`]),
      `pool references: ${show(poolRefs)}`);
  },

  async search_finds_resources_with_their_references() {
    const m = await monitor('ts searched');
    await pool('ts-searched', m.id);
    const pages = await all(lbs.searches.list({ account_id: ACCOUNT, query: 'ts-searched', references: '*' }));
    const found = pages.flatMap((p) => p.resources);
    check(show(found.map((r) => [r.resource_type, r.resource_id])) === show([['pool', 'ts-searched']]),
      `search: ${show(found)}`);
    check(found[0].references[0].resource_id === m.id, `references: ${show(found)}`);
  },

  async a_monitor_preview_reports_each_origin_as_the_probers_saw_it() {
    const m = await monitor('ts preview');
    await pool('ts-preview', m.id);
    const created = await lbs.monitors.previews.create(m.id, {
      account_id: ACCOUNT, type: 'http', path: '/missing', expected_codes: '2xx', interval: 2, timeout: 1,
    });
    check(show(created.pools) === show({ 'ts-preview': 'ts-preview' }), `pools: ${show(created)}`);
    const got = await preview(created.preview_id, 'ts-preview');
    const origin = got.origins[0][ORIGIN];
    check(got.healthy === false && origin.healthy === false, `unhealthy: ${show(got)}`);
    check(origin.response_code === 404, `the code: ${show(got)}`);
    check((origin.failure_reason ?? '').includes('404'), `the reason: ${show(got)}`);
    check((await lbs.monitors.get(m.id, { account_id: ACCOUNT })).path === '/', 'the monitor is unchanged');
  },

  async a_pool_preview_reports_its_origins_healthy() {
    const m = await monitor('ts pool preview', { path: '/missing' });
    await pool('ts-pool-preview', m.id);
    const created = await lbs.pools.health.create('ts-pool-preview', {
      account_id: ACCOUNT, type: 'http', path: '/', expected_codes: '2xx',
    });
    const got = await preview(created.preview_id, 'ts-pool-preview');
    const origin = got.origins[0][ORIGIN];
    check(got.healthy === true && origin.healthy === true, `healthy: ${show(got)}`);
    check(/ms$/.test(origin.rtt ?? ''), `rtt: ${show(got)}`);
  },

  async pool_health_answers_per_region() {
    const m = await monitor('ts health');
    await pool('ts-health', m.id, { check_regions: ['WEU'] });
    const health = await lbs.pools.health.get('ts-health', { account_id: ACCOUNT });
    check(health.pool_id === 'ts-health' && health.pop_health, `health: ${show(health)}`);
  },

  async regions_list_their_countries() {
    const listed = await lbs.regions.list({ account_id: ACCOUNT, country_code_a2: 'FR' });
    check(show(listed.regions.map((r) => r.region_code)) === show(['WEU']), `FR's region: ${show(listed)}`);
    const weu = await lbs.regions.get('WEU', { account_id: ACCOUNT });
    const codes = weu.regions[0].countries.map((c) => c.country_code_a2);
    check(codes.includes('FR') && !codes.includes('JP'), `WEU's countries: ${show(codes)}`);
  },

  async errors_are_typed_with_the_envelopes_errors() {
    const missing = await expectError(lbs.pools.get('ts-no-such-pool', { account_id: ACCOUNT }), 404, 'a missing pool');
    check(missing instanceof Cloudflare.NotFoundError && missing.errors[0].code === 1001, `404: ${show(missing.errors)}`);
    const invalid = await expectError(lbs.monitors.create({ account_id: ACCOUNT, type: 'http', zebra: 1 }), 400, 'an unknown field');
    check(invalid.errors[0].source.pointer === '/zebra', `400: ${show(invalid.errors)}`);
    const wrong = await expectError(client({ apiToken: 'wrong' }).loadBalancers.pools.list({ account_id: ACCOUNT }), 401, 'a wrong token');
    check(wrong instanceof Cloudflare.AuthenticationError && wrong.errors[0].code === 1005, `401: ${show(wrong.errors)}`);
    const unknown = await expectError(cf.get(`/accounts/${ACCOUNT}/load_balancers/zebras`), 404, 'an unknown path');
    check(unknown.errors[0].message.includes('serves'), `unknown path: ${show(unknown.errors)}`);
  },

  async a_conflict_is_not_retried() {
    let requests = 0;
    const counting = (url, init) => {
      requests += 1;
      return fetch(url, init);
    };
    const retrying = client({ maxRetries: 2, fetch: counting });
    const m = await monitor('ts conflict');
    await pool('ts-conflict', m.id);
    const e = await expectError(retrying.loadBalancers.pools.create({
      account_id: ACCOUNT, name: 'ts-conflict', origins: [{ name: 'a', address: ORIGIN, port: PORT }],
    }), 409, 'a second pool of the same id');
    check(e instanceof Cloudflare.ConflictError && e.errors[0].code === 1006, `409: ${show(e.errors)}`);
    check(requests === 1, `the conflict was sent ${requests} times`);
  },

  async private_networks_are_made_and_a_pool_endpoint_in_one_reads_back() {
    const zt = cf.zeroTrust;
    const t = await zt.tunnels.cloudflared.create({ account_id: ACCOUNT, name: 'ts-office', config_src: 'local' });
    check(t.id && t.name === 'ts-office' && t.tun_type === 'cfd_tunnel', `tunnel: ${show(t)}`);
    check(t.status === 'inactive', `a tunnel no connector ever ran is inactive: ${t.status}`);
    const tunnels = await all(zt.tunnels.cloudflared.list({ account_id: ACCOUNT }));
    check(tunnels.some((x) => x.id === t.id), 'listed');
    const token = await zt.tunnels.cloudflared.token.get(t.id, { account_id: ACCOUNT });
    check(typeof token === 'string' && token.length > 40, `token: ${show(token)}`);
    const n = await zt.networks.virtualNetworks.create({
      account_id: ACCOUNT, name: 'ts-office-net', comment: 'the office', is_default_network: false,
    });
    check(n.comment === 'the office' && !n.is_default_network, `network: ${show(n)}`);
    const r = await zt.networks.routes.create({
      account_id: ACCOUNT, network: '10.21.0.0/16', tunnel_id: t.id, virtual_network_id: n.id, comment: 'office LAN',
    });
    check(r.network === '10.21.0.0/16' && r.tunnel_id === t.id, `route: ${show(r)}`);
    const routes = (await all(zt.networks.routes.list({ account_id: ACCOUNT }))).filter((x) => x.id === r.id);
    check(routes.length === 1 && routes[0].tunnel_name === 'ts-office'
      && routes[0].virtual_network_name === 'ts-office-net', `routes: ${show(routes)}`);
    const p = await lbs.pools.create({
      account_id: ACCOUNT, name: 'ts-private',
      origins: [{ name: 'app', address: '10.21.1.5', port: 8080, virtual_network_id: n.id }],
    });
    const got = await lbs.pools.get(p.id, { account_id: ACCOUNT });
    check(got.origins[0].virtual_network_id === n.id, `virtual_network_id: ${show(got.origins)}`);
    await expectError(lbs.pools.create({
      account_id: ACCOUNT, name: 'ts-unrouted',
      origins: [{ name: 'app', address: '10.99.1.5', virtual_network_id: n.id }],
    }), 400, 'an unrouted private endpoint');
    await expectError(zt.tunnels.cloudflared.delete(t.id, { account_id: ACCOUNT }), 400, 'a routed tunnel');
    await lbs.pools.delete(p.id, { account_id: ACCOUNT });
    await zt.networks.routes.delete(r.id, { account_id: ACCOUNT });
    await zt.networks.virtualNetworks.delete(n.id, { account_id: ACCOUNT });
    const gone = await zt.tunnels.cloudflared.delete(t.id, { account_id: ACCOUNT });
    check(gone.deleted_at, `deleted: ${show(gone)}`);
    await expectError(zt.tunnels.cloudflared.get(t.id, { account_id: ACCOUNT }), 404, 'the deleted tunnel');
  },
};

// The preview's answer once an origin of `poolId` is in (30 s at most).
async function preview(previewId, poolId) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const result = await lbs.previews.get(previewId, { account_id: ACCOUNT });
    const got = result[poolId];
    if (got && (got.origins ?? []).length > 0) return got;
    if (Date.now() > deadline) throw new Error(`no outcome of preview ${previewId} in 30 s: ${show(result)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const name = process.argv[2];
if (!checks[name]) {
  console.error(`no check ${name}`);
  process.exit(2);
}
await checks[name]();
