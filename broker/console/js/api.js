// The console's only way to the broker: the HTTP/JSON API under /v1 (docs/http-api.md), same
// origin. With auth on, the token the operator typed is kept in this tab's sessionStorage and
// sent as `Authorization: Bearer`; a 401 asks for it again and repeats the request.

const TOKEN_KEY = 'txmq.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code || '';
  }
}

let askToken = null;    // async (reason) => token, set by the app (dialogs.js)
const partialListeners = new Set();

// A broker in cluster mode answers the cluster's view and says in `cluster` whether it is whole
// (docs/cluster.md "The admin HTTP API and the console in a cluster"). fn(path, cluster) runs
// for every answer that is not: the app shows it, so a partial view never passes as whole.
export function onPartialView(fn) {
  partialListeners.add(fn);
}
let asking = null;      // the prompt in progress: concurrent 401s share it
const listeners = new Set();

export function onTokenPrompt(fn) {
  askToken = fn;
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  for (const l of listeners) l();
}

export function onTokenChange(fn) {
  listeners.add(fn);
}

async function promptToken(reason) {
  if (!askToken) throw new ApiError(401, 'UNAUTHENTICATED', 'a token is required');
  if (!asking) {
    asking = askToken(reason).finally(() => {
      asking = null;
    });
  }
  const t = await asking;
  sessionStorage.setItem(TOKEN_KEY, t);
  for (const l of listeners) l();
  return t;
}

// api('GET', '/v1/topics') -> parsed JSON. Throws ApiError with the API's error code and
// message ({"error": CODE, "message": TEXT}) for any other status than 2xx.
export async function api(method, path, body) {
  for (;;) {
    const sent = token();
    const headers = { Accept: 'application/json' };
    if (sent) headers.Authorization = `Bearer ${sent}`;
    const init = { method, headers, cache: 'no-store', credentials: 'omit' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    if (res.status === 401) {
      // Another request may have stored a fresh token meanwhile: retry with it first.
      if (token() && token() !== sent) continue;
      await promptToken(sent ? 'The broker refused this token. Enter another.' : null);
      continue;
    }
    const textBody = await res.text();
    let data = null;
    if (textBody) {
      try {
        data = JSON.parse(textBody);
      } catch {
        data = null;
      }
    }
    if (!res.ok) {
      const code = data && typeof data.error === 'string' ? data.error : '';
      const message = data && typeof data.message === 'string' ? data.message : textBody.trim();
      throw new ApiError(res.status, code, message || `${method} ${path}: HTTP ${res.status}`);
    }
    if (data && data.cluster && data.cluster.complete === false) {
      for (const l of partialListeners) l(path, data.cluster);
    }
    return data;
  }
}

// Query string from an object, skipping empty values.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

export const enc = encodeURIComponent;
