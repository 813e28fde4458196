// A line chart of EWMA RTT per region over the last hour, drawn as SVG elements (no markup
// strings, no inline style: the regions' colours are classes of console.css).

const SVG = 'http://www.w3.org/2000/svg';
const W = 640;
const H = 200;
const PAD = 34;

function el(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

/** `history`: region -> [[unix seconds, ms], ...]. */
export function rttChart(history) {
  const series = Object.entries(history);
  const points = series.flatMap(([, p]) => p);
  const wrap = document.createElement('figure');
  if (!points.length) {
    wrap.append('No RTT history yet: one sample a minute is kept for an hour.');
    return wrap;
  }
  const t0 = Math.min(...points.map((p) => p[0]));
  const t1 = Math.max(...points.map((p) => p[0]), t0 + 60);
  const max = Math.max(...points.map((p) => p[1]), 1);
  const x = (t) => PAD + ((t - t0) / (t1 - t0)) * (W - 2 * PAD);
  const y = (v) => H - PAD + 10 - (v / max) * (H - 2 * PAD);
  const svg = el('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': `EWMA RTT per region, up to ${max.toFixed(1)} ms` });
  svg.append(el('line', { x1: PAD, y1: y(0), x2: W - PAD, y2: y(0), class: 'axis' }));
  svg.append(el('text', { x: 2, y: y(max) + 4, class: 'tick' }, `${max.toFixed(0)} ms`));
  svg.append(el('text', { x: 2, y: y(0), class: 'tick' }, '0'));
  svg.append(el('text', { x: PAD, y: H - 4, class: 'tick' }, new Date(t0 * 1000).toLocaleTimeString()));
  svg.append(el('text', { x: W - PAD - 60, y: H - 4, class: 'tick' }, new Date(t1 * 1000).toLocaleTimeString()));
  for (const [region, p] of series) {
    const line = el('polyline', { class: `line r-${region}`, points: p.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ') });
    line.append(el('title', {}, region));
    // The latest point as a dot, so that a series of one point shows too.
    const [tl, vl] = p[p.length - 1];
    const dot = el('circle', { class: `dot r-${region}`, cx: x(tl).toFixed(1), cy: y(vl).toFixed(1), r: 3 });
    svg.append(line, dot);
  }
  const legend = document.createElement('figcaption');
  for (const [region, p] of series) {
    const item = document.createElement('span');
    item.className = `legend r-${region}`;
    item.textContent = `— ${region} ${p[p.length - 1][1].toFixed(1)} ms `;
    legend.append(item);
  }
  wrap.append(svg, legend);
  return wrap;
}
