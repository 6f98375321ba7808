// How numbers, sizes, times and durations read on the pages. Pure functions.

const nf = new Intl.NumberFormat('en-US');

export function num(n) {
  if (n === null || n === undefined || n === '') return '-';
  const v = Number(n);
  return Number.isFinite(v) ? nf.format(v) : String(n);
}

export function bytes(n) {
  const v = Number(n);
  if (!Number.isFinite(v)) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let x = v;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i += 1;
  }
  return i === 0 ? `${v} B` : `${x.toFixed(x < 10 ? 1 : 0)} ${units[i]}`;
}

// 1500 -> "1.5s", 90000 -> "1m30s", 7200000 -> "2h".
export function duration(ms) {
  const v = Number(ms);
  if (!Number.isFinite(v) || v < 0) return '-';
  if (v < 1000) return `${Math.round(v)}ms`;
  const s = v / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)}s`;
  const total = Math.round(s);
  const d = Math.floor(total / 86400);
  const hh = Math.floor((total % 86400) / 3600);
  const mm = Math.floor((total % 3600) / 60);
  const ss = total % 60;
  const parts = [];
  if (d) parts.push(`${d}d`);
  if (hh) parts.push(`${hh}h`);
  if (mm && !d) parts.push(`${mm}m`);
  if (ss && !d && !hh) parts.push(`${ss}s`);
  return parts.join('') || '0s';
}

export function time(ms) {
  const v = Number(ms);
  if (!v) return '-';
  return new Date(v).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

// An enum name from the API without its prefix, lower case: "WEBHOOK_DELIVERED" -> "delivered".
export function enumText(value, prefix = '') {
  if (value === null || value === undefined) return '-';
  let s = String(value);
  if (prefix && s.startsWith(prefix)) s = s.slice(prefix.length);
  return s.toLowerCase();
}

// A bytes field of the API as text: `name` when it was UTF-8, else "base64:" + `name_base64`.
export function bytesField(obj, name) {
  if (!obj) return '';
  if (obj[name] !== undefined && obj[name] !== null) return String(obj[name]);
  if (obj[`${name}_base64`] !== undefined) return `base64:${obj[`${name}_base64`]}`;
  return '';
}

export function short(s, max = 80) {
  const t = String(s ?? '');
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}
