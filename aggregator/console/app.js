// The console's router and its live view: the overview is polled every second with
// `If-None-Match`, so an unchanged mesh costs a 304; when it changes, the view shown is drawn
// again (a health change appears within about a second, and well within the 2 s promised).

import { ApiError, get, token } from './api.js';
import { h, show } from './dom.js';
import { overview } from './overview.js';
import { grid } from './grid.js';
import { pool } from './pool.js';
import { events } from './events.js';
import { explain } from './explain.js';

const POLL_MS = 1000;
// Every this many polls the overview is asked for without its tag: the RTTs it shows move
// without changing the tag (`state_tag` in aggregator/src/console/views.rs).
const REFRESH_EVERY = 30;
let polls = 0;
const view = document.getElementById('view');
const live = document.getElementById('live');
const notice = document.getElementById('notice');
let latest = null;
let etag = null;

function notify(text, error = false) {
  notice.hidden = false;
  notice.className = error ? 'notice error' : 'notice';
  show(notice, text);
}

/** The route of the address's fragment: a view name, a path argument, query arguments. */
function route() {
  const [path, q] = location.hash.replace(/^#\/?/, '').split('?');
  const [name, ...rest] = path.split('/');
  return { name: name || 'overview', arg: rest.length ? decodeURIComponent(rest.join('/')) : null, args: Object.fromEntries(new URLSearchParams(q ?? '')) };
}

function go(name, args) {
  const q = new URLSearchParams(Object.entries(args).filter(([, v]) => v !== '' && v !== null && v !== undefined)).toString();
  location.hash = `#/${name}${q ? `?${q}` : ''}`;
}

function draw() {
  if (!latest) return;
  const r = route();
  let parts;
  try {
    switch (r.name) {
      case 'grid': parts = grid(r.args, latest.pools.map((p) => p.name), (a) => go('grid', a)); break;
      case 'pool': parts = pool(r.arg ?? '', notify); break;
      case 'events': parts = events(r.args, (a) => go('events', a)); break;
      case 'explain': parts = explain(r.args, latest.load_balancers.map((l) => l.name), (a) => go('explain', a)); break;
      default: parts = overview(latest);
    }
  } catch (e) {
    parts = [h('p', { class: 'error' }, String(e))];
  }
  show(view, parts);
  document.title = `meshlb · ${r.name} · ${latest.pop.region}`;
}

async function poll() {
  try {
    polls += 1;
    const answer = await get('/console/overview', polls % REFRESH_EVERY === 0 ? null : etag);
    if (answer.status !== 304) {
      const changed = answer.etag !== etag || route().name === 'overview';
      latest = answer.body;
      etag = answer.etag;
      if (changed) draw();
      performance.mark('meshlb-drawn');
    }
    show(live, `live · generation ${latest.pop.config_generation} · snapshot ${latest.pop.snapshot_version} · ${new Date().toLocaleTimeString()}`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      show(view, h('p', { class: 'error' }, 'This aggregator needs a token to read: type the admin or read token above.'));
      document.getElementById('token').focus();
    } else {
      show(live, `not live: ${e.message}`);
    }
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

document.getElementById('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const input = document.getElementById('token');
  if (input.value) token.set(input.value);
  input.value = '';
  etag = null;
  notify('Token kept for this tab.');
});
document.getElementById('token-clear').addEventListener('click', () => {
  token.clear();
  etag = null;
  notify('Token forgotten.');
});
window.addEventListener('hashchange', () => { draw(); view.focus(); });
poll();
