// The admin API as the console calls it. A token typed into the page is kept in this tab's
// sessionStorage and sent as `Authorization: Bearer`, never in an address or a cookie.

const KEY = 'meshlb.admin-token';

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(extra = {}) {
  const h = { Accept: 'application/json', ...extra };
  const t = token.get();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

function reason(body, fallback) {
  if (body && typeof body.error === 'string') return body.error;
  if (body && Array.isArray(body.errors) && body.errors.length) {
    return body.errors.map((e) => e.message).join('; ');
  }
  return fallback;
}

async function answer(r) {
  const body = r.status === 304 ? null : await r.json().catch(() => null);
  if (!r.ok && r.status !== 304) throw new ApiError(r.status, reason(body, `${r.status} ${r.statusText}`));
  return { status: r.status, body, etag: r.headers.get('ETag') };
}

/** GET `path`; with `etag`, a 304 answers `{ status: 304 }`. */
export async function get(path, etag) {
  const extra = etag ? { 'If-None-Match': etag } : {};
  return answer(await fetch(path, { headers: headers(extra), cache: 'no-store' }));
}

/** A state-changing call with a JSON body (or none). */
export async function send(method, path, body, extra = {}) {
  const init = { method, headers: headers({ ...extra, 'Content-Type': 'application/json' }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  return answer(await fetch(path, init));
}

/** A query string of the non-empty `args`. */
export function query(args) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(args)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}
