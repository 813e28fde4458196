// A pool: its endpoints with weight, drain, verdict and each region's verdict; its EWMA RTT per
// region; its recent events; and, with the admin token, its actions.

import { get, query, send } from './api.js';
import { badge, h, ms, show, table } from './dom.js';
import { REGIONS } from './grid.js';
import { eventRows } from './events.js';
import { rttChart as historyChart } from './chart.js';

const API = '/client/v4/accounts/console/load_balancers/pools';

export function pool(name, notify) {
  const body = h('div', {}, h('p', {}, 'Loading…'));
  load(name, body, notify);
  return [h('h1', {}, 'Pool ', name), body];
}

async function load(name, body, notify) {
  const [{ body: p }, { body: events }] = await Promise.all([
    get(`/console/pool${query({ name })}`),
    get(`/events${query({ pool: name, since: Date.now() - 3600_000 })}`),
  ]);
  const reload = () => load(name, body, notify);
  const act = (what, run) => async () => {
    if (!window.confirm(what)) return;
    try {
      await run();
      notify(`${what}: done`);
    } catch (e) {
      notify(`${what}: refused (${e.status}): ${e.message}`, true);
    }
    reload();
  };
  show(body,
    h('p', {}, badge(p.state), ` ${p.description || ''} `, p.enabled ? '' : badge('disabled', 'disabled'),
      ` minimum origins ${p.minimum_origins}; checked from ${p.check_regions.join(', ')}`),
    h('p', {}, h('button', {
      type: 'button',
      onclick: act(`${p.enabled ? 'Disable' : 'Enable'} pool ${name}`, () => send('PATCH', `${API}/${encodeURIComponent(name)}`, { enabled: !p.enabled })),
    }, p.enabled ? 'Disable pool' : 'Enable pool')),
    table('Endpoints', ['Endpoint', 'Weight', 'Verdict', 'Regions', 'Actions'],
      p.endpoints.map((e) => [
        h('span', {}, e.name, h('br'), h('small', {}, e.address), e.private ? [h('br'), reach(e.private)] : ''),
        String(e.weight),
        h('span', {}, badge(e.verdict), e.drained_since ? [' ', badge('drained')] : '', e.enabled ? '' : [' ', badge('disabled')]),
        h('span', { class: 'mini' }, REGIONS.filter((r) => e.regions[r] !== 'none')
          .map((r) => badge(e.regions[r], r))),
        h('span', { class: 'actions' },
          h('button', {
            type: 'button',
            onclick: act(`${e.drained_since ? 'Undrain' : 'Drain'} ${name}/${e.name}`,
              () => send(e.drained_since ? 'DELETE' : 'POST', `/drain${query({ pool: name, endpoint: e.name })}`)),
          }, e.drained_since ? 'Undrain' : 'Drain'),
          h('button', {
            type: 'button',
            onclick: act(`${e.enabled ? 'Disable' : 'Enable'} ${name}/${e.name}`, () => setEnabled(name, e.name, !e.enabled)),
          }, e.enabled ? 'Disable' : 'Enable')),
      ])),
    h('h2', {}, 'EWMA RTT per region'),
    rttChart(p.rtt_ms),
    h('h2', {}, 'EWMA RTT over the last hour'),
    historyChart(p.rtt_history),
    h('h2', {}, 'Events of the last hour'),
    events.length ? eventRows(events) : h('p', {}, 'No health change in the last hour.'));
  performance.mark('meshlb-pool-drawn');
}

/** How a private endpoint is reached from this PoP: its network, its tunnel, the tunnel's
 * connections here and the PoPs holding it (docs/private-networks.md). */
function reach(p) {
  const through = p.connections_here > 0
    ? `${p.connections_here} connection(s) here`
    : p.holders.length ? `via ${p.holders.join(', ')}` : 'no PoP holds it';
  return h('small', { class: 'private' },
    `network ${p.network}, tunnel ${p.tunnel || '(no route)'}: `,
    badge(p.connections_here > 0 || p.holders.length ? 'healthy' : 'unhealthy', through));
}

/** Enables or disables one endpoint: the pool's origins written back with that one changed,
 * based on the generation read (a concurrent write makes it a conflict, not a lost update). */
async function setEnabled(poolName, endpoint, enabled) {
  const path = `${API}/${encodeURIComponent(poolName)}`;
  const { body, etag } = await get(path);
  const origins = body.result.origins.map((o) => (o.name === endpoint ? { ...o, enabled } : o));
  return send('PATCH', path, { origins }, etag ? { 'If-Match': etag } : {});
}

/** Bars of EWMA RTT per region, drawn as elements (no markup, no inline style). */
function rttChart(rtt) {
  const entries = Object.entries(rtt);
  if (!entries.length) return h('p', {}, 'No RTT measured yet.');
  const max = Math.max(...entries.map(([, v]) => v), 1);
  return h('ul', { class: 'bars' }, entries.map(([region, v]) => h('li', {},
    h('span', { class: 'bar-label' }, region),
    h('meter', { min: 0, max, value: v, title: ms(v) }),
    h('span', {}, ms(v)))));
}
