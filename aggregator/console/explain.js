// Explain: a load balancer, a client address or region and DNS or proxy, and the decision
// with its path, as `GET /explain` answers it.

import { get, query } from './api.js';
import { h, show } from './dom.js';
import { REGIONS } from './grid.js';

export function explain(args, lbs, rerender) {
  const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); const d = new FormData(form); rerender(Object.fromEntries(d.entries())); } },
    h('label', {}, 'Load balancer ', h('select', { name: 'lb' }, lbs.map((n) => h('option', { value: n, selected: n === args.lb }, n)))),
    h('label', {}, ' Client IP ', h('input', { name: 'client', value: args.client ?? '', placeholder: 'optional' })),
    h('label', {}, ' PoP region ', h('select', { name: 'pop' }, h('option', { value: '' }, 'this one'),
      REGIONS.map((r) => h('option', { value: r, selected: r === args.pop }, r)))),
    h('label', {}, ' Mode ', h('select', { name: 'mode' }, ['dns', 'proxy'].map((m) => h('option', { value: m, selected: m === (args.mode ?? 'dns') }, m)))),
    h('button', { type: 'submit' }, 'Explain'));
  const body = h('div', { id: 'explained', 'aria-live': 'polite' });
  if (args.lb) {
    get(`/explain${query({ lb: args.lb, client: args.client, pop: args.pop, mode: args.mode })}`)
      .then(({ body: x }) => show(body,
        h('h2', {}, 'Decision'),
        h('p', { id: 'outcome' }, h('strong', {}, x.outcome), ` (TTL ${x.ttl} s, PoP ${x.pop}, ${x.mode})`),
        x.matched_rules.length ? h('p', {}, `Rules matched: ${x.matched_rules.join(', ')}`) : '',
        h('h2', {}, 'Path'),
        h('ol', { id: 'steps' }, x.steps.map((s) => h('li', {}, s)))))
      .catch((e) => show(body, h('p', { class: 'error' }, e.message)));
  }
  return [h('h1', {}, 'Explain'), form, body];
}
