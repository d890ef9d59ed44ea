// fetch wrapper for /api/v1. Failures throw ApiError carrying the server's error.message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// With `auth = true` nasd wants "Authorization: Bearer <token>"; the token lives in
// localStorage and is asked for once when the API answers 401.
const TOKEN_KEY = 'nasd-token';
let tokenPrompt = null;

function askToken() {
  tokenPrompt ??= Promise.resolve().then(() => {
    const t = window.prompt('This nasd requires an API token (create one with: nasd --create-token NAME):');
    if (t && t.trim()) localStorage.setItem(TOKEN_KEY, t.trim());
    return !!(t && t.trim());
  }).finally(() => { tokenPrompt = null; });
  return tokenPrompt;
}

export async function api(method, path, body, retried = false) {
  const opts = { method, headers: { Accept: 'application/json' } };
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) opts.headers.Authorization = 'Bearer ' + token;
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch('/api/v1/' + path, opts);
  } catch (e) {
    throw new ApiError(0, 'network', `cannot reach nasd (${e.message})`);
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (res.status === 401 && !retried) {
    localStorage.removeItem(TOKEN_KEY);
    if (await askToken()) return api(method, path, body, true);
  }
  if (!res.ok) {
    const err = data && data.error;
    throw new ApiError(res.status, (err && err.code) || `http_${res.status}`,
      (err && err.message) || `HTTP ${res.status} ${res.statusText}`);
  }
  return data;
}

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body ?? {});
export const patch = (path, body) => api('PATCH', path, body);
export const del = (path) => api('DELETE', path);

// "tank/vol1" -> "tank/vol1" with each segment escaped.
export const key = (...parts) => parts.map((p) => String(p).split('/').map(encodeURIComponent).join('/')).join('/');
