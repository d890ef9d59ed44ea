// Human-readable numbers. Sizes are binary (KiB = 1024), as the API's "10G" means 10 GiB.
const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

export function bytes(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '—';
  let i = 0;
  let v = Number(n);
  while (Math.abs(v) >= 1024 && i < UNITS.length - 1) { v /= 1024; i++; }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${UNITS[i]}`;
}

export function count(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '—';
  const v = Number(n);
  if (Math.abs(v) < 10 && !Number.isInteger(v)) return v.toFixed(1);
  return Math.round(v).toLocaleString('en-US');
}

export function rate(bps) {
  if (bps === undefined || bps === null) return '—';
  return `${(Number(bps) / 1e6).toFixed(bps >= 1e8 ? 0 : bps >= 1e7 ? 1 : 2)} MB/s`;
}

export function mbps(v) {
  return v === undefined || v === null ? '—' : `${Number(v).toFixed(v >= 100 ? 0 : 1)} MB/s`;
}

export function micros(us) {
  if (us === undefined || us === null) return '—';
  const v = Number(us);
  if (v >= 10000) return `${(v / 1000).toFixed(0)} ms`;
  if (v >= 1000) return `${(v / 1000).toFixed(1)} ms`;
  return `${Math.round(v)} µs`;
}

export function pct(p) {
  return p === undefined || p === null ? '—' : `${Number(p).toFixed(1)} %`;
}

export function date(unix) {
  if (!unix) return '—';
  return new Date(unix * 1000).toLocaleString('en-GB', { dateStyle: 'short', timeStyle: 'medium' });
}

export function duration(sec) {
  const s = Math.max(0, Math.floor(sec));
  const d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600), mm = Math.floor((s % 3600) / 60);
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${mm}m`;
  if (mm) return `${mm}m ${s % 60}s`;
  return `${s}s`;
}

export function clock(unix) {
  const d = new Date(unix * 1000);
  return d.toTimeString().slice(0, 8);
}

// Latency of a sample: "—" when nothing was measured (an idle export reports 0).
export function latency(us) {
  return !us ? '—' : micros(us);
}

// API messages carry raw byte counts ("pool tank has 933531648 bytes unreserved, ..."):
// shown in binary units ("890 MiB"). Counts under 1 KiB stay as they are.
export function humanize(msg) {
  return String(msg ?? '').replace(/\b(\d{4,}) bytes\b/g, (m, n) => bytes(Number(n)))
    .replace(/\b(\d{4,})( requested| free| available| needed)\b/g, (m, n, w) => `${bytes(Number(n))}${w}`);
}
