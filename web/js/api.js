// fetch wrapper for /api/v1. Failures throw ApiError carrying the server's error.message
// (status 0 = nasd could not be reached). Tracks whether nasd answers (onConnection) and
// asks for the API token in a form (token.js) when the API answers 401.
import { askToken } from './token.js';

export class ApiError extends Error {
  constructor(status, code, message, data) {
    super(message);
    this.status = status;
    this.code = code;
    this.data = data; // the whole error answer, e.g. {found: [...], force_required: true}
  }
  get unreachable() { return this.status === 0; }
}

export const TOKEN_KEY = 'nasd-token';
const TIMEOUT_MS = 8000;

// Connection state for the banner: 'ok' after any answer, 'down' when a request could not
// reach nasd (refused, reset, timed out). Listeners get (state, lastOkTime).
let conn = 'ok', lastOk = null;
const listeners = new Set();
export const onConnection = (fn) => { listeners.add(fn); fn(conn, lastOk); };
function setConn(state) {
  if (state === 'ok') lastOk = new Date();
  if (state === conn) return;
  conn = state;
  for (const fn of listeners) fn(conn, lastOk);
}
export const connectionState = () => conn;

export async function api(method, path, body, attempt = 0) {
  const opts = { method, headers: { Accept: 'application/json' } };
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) opts.headers.Authorization = 'Bearer ' + token;
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  opts.signal = ctl.signal;
  let res, text;
  try {
    res = await fetch('/api/v1/' + path, opts);
    text = await res.text();
  } catch (e) {
    setConn('down');
    throw new ApiError(0, 'network', ctl.signal.aborted ? `nasd did not answer within ${TIMEOUT_MS / 1000} s`
      : `cannot reach nasd (${e.message})`);
  } finally {
    clearTimeout(timer);
  }
  setConn('ok');
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  const err = data && data.error;
  const message = (err && typeof err === 'object' ? err.message : err) || `HTTP ${res.status} ${res.statusText}`;
  if (res.status === 401 && attempt < 3) {
    // Sent before a token was entered (or with an older one): retry with the current one, no question.
    const now = localStorage.getItem(TOKEN_KEY);
    if (now && now !== token) return api(method, path, body, attempt + 1);
    // Sent with the current token (wrong) or none at all: ask, once for all requests waiting.
    if (await askToken({ wrong: !!token, message })) return api(method, path, body, attempt + 1);
  }
  if (!res.ok) {
    const code = (err && err.code) || (data && data.code) || `http_${res.status}`;
    throw new ApiError(res.status, code, message, data);
  }
  return data;
}

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body ?? {});
export const patch = (path, body) => api('PATCH', path, body);
export const del = (path) => api('DELETE', path);

// "tank/vol1" -> "tank/vol1" with each segment escaped.
export const key = (...parts) => parts.map((p) => String(p).split('/').map(encodeURIComponent).join('/')).join('/');
