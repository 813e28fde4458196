// The overview: this PoP, the mesh, every load balancer with its pools in steering order, and
// every pool with its healthy endpoints and EWMA RTT from this region.

import { badge, h, link, ms, table } from './dom.js';

export function overview(data) {
  const pop = data.pop;
  const primary = pop.mesh_config?.primary;
  const regions = Object.entries(data.mesh.probers);
  return [
    h('h1', {}, 'Overview'),
    h('section', { class: 'cards', 'aria-label': 'This PoP' },
      card('This PoP', pop.region, pop.node_id),
      card('Config', `generation ${pop.config_generation}`, h('code', {}, pop.config_hash.slice(0, 12))),
      card('Config role', pop.mesh_config?.role ?? 'standalone',
        primary ? `primary: ${primary.node_id}` : 'no primary in the mesh'),
      card('Health', pop.fail_static ? badge('unhealthy', 'failing static') : badge('healthy', 'tallying'),
        `snapshot ${pop.snapshot_version}`),
      card('Mesh', `${data.mesh.aggregators} aggregators`,
        data.mesh.drift ? badge('degraded', `${data.mesh.drift} drifting`) : 'no config drift')),
    h('section', { 'aria-label': 'Probers per region' },
      h('h2', {}, 'Probers'),
      regions.length
        ? h('ul', { class: 'regions' }, regions.map(([r, n]) => h('li', {},
          badge(n.live === n.total ? 'healthy' : n.live ? 'degraded' : 'unhealthy', r),
          ` ${n.live}/${n.total}`)))
        : h('p', {}, 'No prober is in the mesh.')),
    table('Load balancers', ['Name', 'State', 'Steering', 'Pools in order'],
      data.load_balancers.map((lb) => [
        lb.name,
        badge(lb.state),
        `${lb.steering_policy}${lb.proxied ? ', proxied' : ''}${lb.protocol === 'http' ? '' : `, ${lb.protocol}`}`,
        h('ol', { class: 'inline' }, lb.pools.map((p) => h('li', {}, link('pool', p.name), ' ', badge(p.state), ` (${p.role})`))),
      ])),
    table('Pools', ['Pool', 'State', 'Healthy', `RTT from ${pop.region}`],
      data.pools.map((p) => [
        link('pool', p.name),
        badge(p.state),
        `${p.healthy}/${p.total}`,
        ms(p.rtt_ms),
      ])),
  ];
}

function card(title, ...lines) {
  return h('div', { class: 'card' }, h('h2', {}, title), lines.map((l) => h('p', {}, l)));
}
