// Client-side checks mirroring api/validate.c, so most mistakes are caught before a
// request; the API stays the authority and its messages are always shown too.
// Each check returns an error message or null.

export function name(v, label = 'name') {
  if (!v) return `${label} is required`;
  if (v.length > 63) return `${label} longer than 63 characters`;
  const bad = v.search(/[^A-Za-z0-9_.:-]/);
  if (bad >= 0) return `${label} may contain only letters, digits and _ . : - (bad character "${v[bad]}")`;
  if (v[0] === '.' || v[0] === '-') return `${label} may not start with "${v[0]}"`;
  if (v.includes('..')) return `${label} may not contain ".."`;
  return null;
}

// "10G", "512M", "1.5T", "4096", "10GiB" -> bytes, or null if malformed.
export function parseSize(v) {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(?:([KMGTP])(?:i)?(?:b)?)?\s*$/i.exec(String(v ?? ''));
  if (!m) return null;
  const mult = m[2] ? 1024 ** ('KMGTP'.indexOf(m[2].toUpperCase()) + 1) : 1;
  const n = Math.floor(Number(m[1]) * mult);
  return n >= 1 && n < 9.2e18 ? n : null;
}

export function size(v, label = 'size', { min = 1, multiple = 1, required = true } = {}) {
  if (!v) return required ? `${label} is required` : null;
  const n = parseSize(v);
  if (n === null) return `${label}: invalid size "${v}" (use a number with K, M, G, T or P, e.g. 10G)`;
  if (n < min) return `${label} must be at least ${min >= 1048576 ? `${min / 1048576}M` : `${min} bytes`}`;
  if (n % multiple) return `${label} must be a multiple of ${multiple} bytes`;
  return null;
}

export function absPath(v, label = 'path') {
  if (!v || v[0] !== '/') return `${label} must be an absolute path`;
  if (v.length > 1023) return `${label} longer than 1023 bytes`;
  if (v.includes('//')) return `${label} may not contain "//"`;
  if (v.split('/').some((c) => c === '.' || c === '..')) return `${label} may not contain "." or ".." components`;
  return null;
}

export function iqn(v, label = 'IQN') {
  if (/^eui\.[0-9a-f]{16}$/i.test(v) || /^naa\.([0-9a-f]{16}|[0-9a-f]{32})$/i.test(v)) return null;
  if (!/^iqn\.\d{4}-\d{2}\.[a-z0-9.:-]+$/.test(v) || v.length > 223)
    return `${label} "${v}" must look like iqn.YYYY-MM.reverse.domain[:name] (lower case)`;
  return null;
}

export function chap(user, secret, label = 'CHAP') {
  if (!user && !secret) return null;
  if (!user || user.length > 63) return `${label} user must be 1..63 characters`;
  if (secret.length < 12 || secret.length > 16) return `${label} secret must be 12..16 characters`;
  if (/\s/.test(user + secret)) return `${label} user and secret may not contain spaces`;
  return null;
}

export function cidr(v) {
  const [addr, prefix, extra] = v.split('/');
  if (extra !== undefined || (prefix !== undefined && !/^\d{1,3}$/.test(prefix))) return `client "${v}" is not an address or CIDR`;
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(addr);
  if (v4) {
    if (v4.slice(1).some((o) => Number(o) > 255) || (prefix !== undefined && Number(prefix) > 32))
      return `client "${v}" is not a valid IPv4 address/prefix`;
    return null;
  }
  if (addr.includes(':') && /^[0-9a-f:.]+$/i.test(addr) && (prefix === undefined || Number(prefix) <= 128)) return null;
  return `client "${v}" is not an IP address or CIDR (e.g. 192.168.1.0/24)`;
}

export function intRange(v, lo, hi, label) {
  const n = Number(v);
  if (v === '' || !Number.isInteger(n) || n < lo || n > hi) return `${label} must be a whole number in ${lo}..${hi}`;
  return null;
}

// Permission bits as octal text, e.g. "0775" or "755" (api/datasets.c accepts 0..07777).
export function mode(v, label = 'mode') {
  if (!/^[0-7]{1,4}$/.test(v)) return `${label} must be octal like "0755"`;
  return null;
}

// Split a textarea of entries separated by newlines, commas or spaces.
export const list = (v) => String(v || '').split(/[\s,]+/).filter(Boolean);
