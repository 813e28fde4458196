// The health grid: endpoints by the 13 regions, a page at a time (the API is asked for the
// page shown only); a cell opens the votes of its region's datacenters.

import { get, query } from './api.js';
import { badge, h, link, ms, show, when } from './dom.js';

export const REGIONS = ['WNAM', 'ENAM', 'WEU', 'EEU', 'NSAM', 'SSAM', 'OC', 'ME', 'NAF', 'SAF', 'SAS', 'SEAS', 'NEAS'];
const PAGE = 100;

export function grid(args, pools, rerender) {
  const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); filter(); } },
    h('label', {}, 'Pool ', h('select', { name: 'pool' }, h('option', { value: '' }, 'every pool'),
      pools.map((p) => h('option', { value: p, selected: p === args.pool }, p)))),
    h('label', {}, ' State ', h('select', { name: 'state' },
      ['', 'healthy', 'unhealthy', 'unknown'].map((s) => h('option', { value: s, selected: s === (args.state ?? '') }, s || 'any')))),
    h('button', { type: 'submit' }, 'Filter'));
  function filter() {
    const data = new FormData(form);
    rerender({ pool: data.get('pool'), state: data.get('state'), offset: 0 });
  }
  const body = h('div', {}, h('p', {}, 'Loading…'));
  const detail = h('section', { class: 'detail', 'aria-live': 'polite' });
  load(args, body, detail, rerender);
  return [h('h1', {}, 'Health grid'), form, body, detail];
}

async function load(args, body, detail, rerender) {
  const offset = Number(args.offset ?? 0);
  const { body: page } = await get(`/console/grid${query({ pool: args.pool, state: args.state, offset, limit: PAGE })}`);
  const rows = page.rows.map((r) => h('tr', {},
    h('th', { scope: 'row' }, link('pool', r.pool), ' / ', r.endpoint, h('br'), h('small', {}, r.address)),
    h('td', {}, badge(r.drained ? 'drained' : r.verdict, r.drained ? `${r.verdict}, drained` : r.verdict)),
    REGIONS.map((region) => h('td', { class: 'cell' },
      h('button', {
        type: 'button',
        class: `cell s-${r.regions[region]}`,
        'aria-label': `${r.endpoint} in ${region}: ${r.regions[region]}`,
        onclick: () => votes(detail, r.pool, r.endpoint, region),
      }, cellShape(r.regions[region]))))));
  show(body,
    h('table', { class: 'grid' },
      h('caption', {}, `${page.total} endpoints; ${offset + 1}–${offset + page.rows.length} shown`),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Endpoint'), h('th', { scope: 'col' }, 'Verdict'),
        REGIONS.map((r) => h('th', { scope: 'col' }, r)))),
      h('tbody', {}, rows)),
    h('nav', { class: 'pages', 'aria-label': 'Pages' },
      h('button', { type: 'button', disabled: offset === 0, onclick: () => rerender({ ...args, offset: Math.max(0, offset - PAGE) }) }, '← previous'),
      h('button', { type: 'button', disabled: offset + PAGE >= page.total, onclick: () => rerender({ ...args, offset: offset + PAGE }) }, 'next →')));
  performance.mark('meshlb-grid-drawn');
}

function cellShape(state) {
  return { healthy: '●', unhealthy: '✕', unknown: '?', none: '–' }[state] ?? '•';
}

/** The votes of `region`'s datacenters on one endpoint. */
export async function votes(detail, pool, endpoint, region) {
  show(detail, h('p', {}, 'Loading votes…'));
  const { body } = await get(`/console/votes${query({ pool, endpoint })}`);
  const blocks = body.checks.map((check) => {
    const r = check.regions.find((v) => v.region === region);
    const title = `${pool} / ${endpoint} in ${region}${check.monitor ? ` (monitor ${check.monitor})` : ''}`;
    if (!r) return h('div', {}, h('h2', {}, title), h('p', {}, 'This region does not check the pool.'));
    return h('div', {},
      h('h2', {}, title, ' ', badge(r.verdict === null ? 'unknown' : r.verdict ? 'healthy' : 'unhealthy')),
      h('p', {}, `${r.healthy_dcs} healthy, ${r.unhealthy_dcs} unhealthy, ${r.silent_dcs} silent datacenters`),
      h('table', {}, h('thead', {}, h('tr', {}, ['Datacenter', 'Node', 'Vote', 'RTT', 'Code', 'Reason', 'Age'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, r.datacenters.map((d) => h('tr', {},
          h('td', {}, d.datacenter), h('td', {}, d.node, d.alive ? '' : ' (gone)'),
          h('td', {}, badge(d.healthy === null ? 'unknown' : d.healthy ? 'healthy' : 'unhealthy', d.stale ? 'stale' : undefined)),
          h('td', {}, ms(d.rtt_ms)), h('td', {}, d.code ?? '–'), h('td', {}, d.reason ?? ''),
          h('td', {}, `${d.age_s.toFixed(1)} s`))))));
  });
  show(detail, blocks, h('p', { class: 'small' }, `read ${when(Date.now())}`));
}
