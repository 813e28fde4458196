// The page is built from elements and text nodes only, never from markup: a name from the
// config (a pool called `<img src=x onerror=...>`) is always shown as the text it is.

/** An element `tag` with attributes (`on...` are listeners) and children (nodes or text). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces what `el` holds. */
export function show(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// A state is told by its word and a shape as well as its colour.
const SHAPES = {
  healthy: '●', unhealthy: '✕', unknown: '?', none: '–', critical: '✕', degraded: '◐',
  no_health: '○', unmonitored: '○', drained: '⏸', disabled: '⊘',
};

/** A state as a badge: shape, word, colour. */
export function badge(state, label = state) {
  const s = String(state);
  return h('span', { class: `badge s-${s.replace(/[^a-z_]/g, '')}` }, `${SHAPES[s] ?? '•'} ${label}`);
}

/** A link to a view (`#/pool/NAME`), the name escaped for the address. */
export function link(view, name, text = name) {
  return h('a', { href: `#/${view}/${encodeURIComponent(name)}` }, text);
}

/** A table with a header row and `rows` (arrays of cells). */
export function table(caption, headers, rows) {
  return h('table', {},
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((c) => h('td', {}, c))))));
}

export function ms(v) {
  return v === null || v === undefined ? '–' : `${Number(v).toFixed(1)} ms`;
}

export function when(unixMs) {
  return new Date(unixMs).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}
