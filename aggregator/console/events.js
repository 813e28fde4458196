// The health-change timeline with the votes behind each change, filtered by pool, endpoint and
// time.

import { get, query } from './api.js';
import { badge, h, show, when } from './dom.js';

export function events(args, rerender) {
  const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); const d = new FormData(form); rerender({ pool: d.get('pool'), endpoint: d.get('endpoint'), minutes: d.get('minutes') }); } },
    h('label', {}, 'Pool ', h('input', { name: 'pool', value: args.pool ?? '' })),
    h('label', {}, ' Endpoint ', h('input', { name: 'endpoint', value: args.endpoint ?? '' })),
    h('label', {}, ' Last ', h('input', { name: 'minutes', type: 'number', min: 1, value: args.minutes ?? 60 }), ' minutes'),
    h('button', { type: 'submit' }, 'Filter'));
  const body = h('div', {}, h('p', {}, 'Loading…'));
  const since = Date.now() - Number(args.minutes ?? 60) * 60_000;
  get(`/events${query({ pool: args.pool, endpoint: args.endpoint, since })}`)
    .then(({ body: list }) => show(body, list.length ? eventRows(list) : h('p', {}, 'No health change in that time.')));
  return [h('h1', {}, 'Events'), form, body];
}

/** Events, newest first, each with its votes. */
export function eventRows(list) {
  return h('ol', { class: 'events', reversed: true }, [...list].reverse().map((e) => h('li', {},
    h('time', {}, when(e.at_ms)), ' ',
    h('strong', {}, subject(e)), ' ', badge(String(e.from)), ' → ', badge(String(e.to)),
    e.initial ? ' (first verdict)' : '',
    e.regions?.length ? h('ul', { class: 'votes' }, e.regions.map((r) => h('li', {},
      `${r.region}: `, badge(r.verdict === null ? 'unknown' : r.verdict ? 'healthy' : 'unhealthy'),
      ` ${r.healthy_dcs} up, ${r.unhealthy_dcs} down, ${r.silent_dcs} silent`,
      r.datacenters.filter((d) => d.reason).map((d) => ` — ${d.datacenter}: ${d.reason}`)))) : '')));
}

function subject(e) {
  switch (e.kind) {
    case 'endpoint': return `endpoint ${e.pool}/${e.endpoint}`;
    case 'member': return `monitor ${e.monitor} on ${e.pool}/${e.endpoint}`;
    case 'pool': return `pool ${e.pool}`;
    case 'load_balancer': return `load balancer ${e.load_balancer}`;
    default: return `${e.kind} ${e.pool ?? ''}/${e.endpoint ?? ''}`;
  }
}
