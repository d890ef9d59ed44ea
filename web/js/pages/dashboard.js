// Dashboard: pool health and capacity, per-export live I/O figures (GET /stats every
// second) and a live IOPS chart of the selected export (GET /stats/history).
import { h, fill } from '../dom.js';
import { get } from '../api.js';
import * as fmt from '../format.js';
import { lineChart } from '../chart.js';
import { table, stateBadge, section, select } from '../ui.js';
import { poolCapacity } from './pools.js';
import { withSpace, freeCell } from '../space.js';
import { exportStatus } from './iscsi.js';

const TICK_MS = 1000;
const CONFIG_EVERY = 5; // re-read pools/exports every 5 ticks

// "iscsi:1" identifies an export in /stats and /stats/history.
const exportKey = (type, id) => `${type}:${id}`;
let selected = null; // remembered across visits to the dashboard
let range = '5m';

// Counts not loaded yet show "—", never 0.
function summary(cfg) {
  const card = (k, val, testid) => h('div', { class: 'stat', 'data-testid': testid }, h('div', { class: 'v' }, val), h('div', { class: 'k' }, k));
  const known = (name, v) => (cfg.loaded[name] ? v : '—');
  const healthy = cfg.pools.filter((p) => p.state === 'ONLINE').length;
  return h('div', { class: 'stats-cards' },
    card('pools online', known('pools', `${healthy} / ${cfg.pools.length}`), 'card-pools'),
    card('datasets', known('datasets', cfg.datasets), 'card-datasets'), card('volumes', known('volumes', cfg.volumes), 'card-volumes'),
    card('iSCSI exports', known('iscsi', cfg.iscsi.length), 'card-iscsi'), card('NFS exports', known('nfs', cfg.nfs.length), 'card-nfs'));
}

// Samples in time order, one per timestamp (the later one wins if the sampler repeated a second).
function orderedSamples(hist) {
  const byT = new Map();
  for (const x of (hist && hist.samples) || []) if (Number.isFinite(x.t)) byT.set(x.t, x);
  return [...byT.values()].sort((a, b) => a.t - b.t);
}

// IOPS, throughput (decimal MB/s) and latency (p50/p99) history of one export. Latency is
// drawn only for seconds with I/O: an idle second has no latency, not a latency of 0.
function historyCharts(hist, label, wide = 1000, narrow = 480) {
  const samples = orderedSamples(hist);
  const xFormat = hist && hist.resolution >= 60 ? (t) => fmt.clock(t).slice(0, 5) : fmt.clock;
  const pts = (f, div = 1, list = samples) => list.map((x) => [x.t, (x[f] || 0) / div]);
  const iops = lineChart({ series: [
    { label: 'read', color: 'var(--read)', fill: true, points: pts('read_iops') },
    { label: 'write', color: 'var(--write)', points: pts('write_iops') },
    { label: 'other', color: 'var(--other)', points: pts('other_iops') },
  ], xFormat, unit: 'IOPS', title: 'Operations per second', label: `${label} IOPS`, width: wide, height: 230, empty: 'no samples yet' });
  const tput = lineChart({ series: [
    { label: 'read', color: 'var(--read)', fill: true, points: pts('read_bps', 1e6) },
    { label: 'write', color: 'var(--write)', points: pts('write_bps', 1e6) },
  ], xFormat, unit: 'MB/s', title: 'Throughput (MB/s, 10⁶ bytes/s)', label: `${label} throughput`, width: narrow, height: 220, empty: 'no samples yet' });
  const busy = samples.filter((x) => (x.read_iops || 0) + (x.write_iops || 0) + (x.other_iops || 0) > 0 && x.lat_p50_us > 0);
  const inMs = busy.some((x) => x.lat_p99_us >= 2000);
  const latDiv = inMs ? 1000 : 1;
  const lat = lineChart({ series: [
    { label: 'p50', color: 'var(--read)', points: pts('lat_p50_us', latDiv, busy) },
    { label: 'p99', color: 'var(--write)', points: pts('lat_p99_us', latDiv, busy) },
  ], xFormat, unit: inMs ? 'ms' : 'µs', title: 'Latency', label: `${label} latency`, width: narrow, height: 220,
  empty: samples.length ? 'idle — no I/O, no latency' : 'no samples yet' });
  return { iops, tput, lat };
}

export async function mount(root) {
  let timer = null, tick = 0, alive = true;
  let cfg = { pools: [], iscsi: [], nfs: [], datasets: 0, volumes: 0, loaded: {} };
  let stats = null, statsError = null;

  const summaryBox = h('div', { id: 'summary' });
  const poolsBox = h('div', { id: 'dash-pools' });
  const exportsBox = h('div', { id: 'dash-exports' });
  const notice = h('div', { class: 'notice', role: 'status', hidden: true, 'data-testid': 'stats-unavailable' });
  const rangeSel = select({ id: 'chart-range', 'aria-label': 'chart range' }, [
    { value: '5m', label: 'last 5 minutes', selected: range === '5m' }, { value: '1h', label: 'last hour', selected: range === '1h' },
    { value: '24h', label: 'last 24 hours', selected: range === '24h' }]);
  rangeSel.addEventListener('change', () => { range = rangeSel.value; poll(); });
  const chartTitle = h('h2', { id: 'chart-title' }, 'I/O history');
  const chartBox = h('div', { id: 'iops-chart', 'data-testid': 'iops-chart' });
  const tputBox = h('div', { id: 'tput-chart', 'data-testid': 'tput-chart' });
  const latBox = h('div', { id: 'lat-chart', 'data-testid': 'lat-chart' });
  const figures = h('div', { class: 'kv', id: 'selected-figures', 'data-testid': 'selected-figures' });

  fill(root, h('h1', {}, 'Dashboard'), summaryBox, notice,
    section('Pools', poolsBox),
    section('Exports — live', exportsBox, h('p', { class: 'muted hint-p units-note', 'data-testid': 'units-note' },
      'Rates in MB/s are decimal (1 MB/s = 10⁶ bytes/s); sizes are binary (1 MiB = 2²⁰ bytes, 1 GiB = 2³⁰ bytes). Latency "—": no I/O in that second.')),
    h('section', { class: 'card', 'aria-labelledby': 'chart-title' },
      h('div', { class: 'chart-head' }, chartTitle, rangeSel), figures, chartBox,
      h('div', { class: 'charts2' }, tputBox, latBox)));

  // A list that fails to load keeps its last value (never a made-up empty one); returns
  // false when nothing has been loaded yet.
  async function loadConfig() {
    const names = ['pools', 'iscsi', 'nfs', 'datasets', 'volumes'];
    const got = await Promise.allSettled(['pools', 'exports/iscsi', 'exports/nfs', 'datasets', 'volumes'].map((p) => get(p)));
    got.forEach((r, i) => {
      if (r.status !== 'fulfilled') return;
      cfg[names[i]] = i >= 3 ? r.value.length : r.value;
      if (i >= 3) cfg[`${names[i]}List`] = r.value;
      cfg.loaded[names[i]] = true;
    });
    const { pools, iscsi, nfs } = cfg;
    const all = [...iscsi.map((x) => exportKey('iscsi', x.id)), ...nfs.map((x) => exportKey('nfs', x.id))];
    if (!all.includes(selected)) selected = all[0] || null;
  }

  function statsOf(type, id) {
    return stats && stats.exports.find((e) => e.type === type && e.id === id);
  }

  function renderExports() {
    const rows = [
      ...cfg.iscsi.map((x) => ({ type: 'iscsi', x, target: x.iqn })),
      ...cfg.nfs.map((x) => ({ type: 'nfs', x, target: x.path })),
    ];
    const num = (get1) => (r) => { const s = statsOf(r.type, r.x.id); return s ? get1(s) : '—'; };
    const cell = (field, f) => ({ label: field.label, class: 'num', cell: (r) => h('span', { 'data-field': field.key }, num(f)(r)) });
    const t = table([
      { label: 'Export', cell: (r) => h('div', {}, h('button', { type: 'button', class: 'link', 'aria-pressed': String(selected === exportKey(r.type, r.x.id)),
        'data-testid': `select-export-${r.type}-${r.x.name}`, onclick: () => { selected = exportKey(r.type, r.x.id); renderExports(); poll(); } },
      h('strong', {}, r.x.name)), h('span', { class: 'sub mono' }, r.target)) },
      { label: 'Type', cell: (r) => (r.type === 'iscsi' ? 'iSCSI' : 'NFS') },
      { label: 'Status', cell: (r) => exportStatus(r.x) },
      cell({ label: 'Read IOPS', key: 'read_iops' }, (s) => fmt.count(s.read_iops)),
      cell({ label: 'Write IOPS', key: 'write_iops' }, (s) => fmt.count(s.write_iops)),
      cell({ label: 'Other', key: 'other_iops' }, (s) => fmt.count(s.other_iops)),
      cell({ label: 'Read', key: 'read_bps' }, (s) => fmt.rate(s.read_bps)),
      cell({ label: 'Write', key: 'write_bps' }, (s) => fmt.rate(s.write_bps)),
      cell({ label: 'Lat p50 / p99', key: 'latency' }, (s) => `${fmt.latency(s.lat_p50_us)} / ${fmt.latency(s.lat_p99_us)}`),
      cell({ label: 'CPU', key: 'cpu_pct' }, (s) => fmt.pct(s.cpu_pct)),
    ], rows, { testid: 'exports-live', rowId: (r) => `export-row-${r.type}-${r.x.name}`, empty: cfg.loaded.iscsi && cfg.loaded.nfs ? 'No exports yet — create an iSCSI or NFS export.' : 'export list not loaded (nasd unreachable?)' });
    for (const tr of t.tBodies[0].rows) {
      const r = rows[tr.rowIndex - 1];
      if (!r) continue;
      const s = statsOf(r.type, r.x.id);
      tr.classList.add('clickable');
      if (selected === exportKey(r.type, r.x.id)) tr.classList.add('selected');
      if (s) {
        tr.dataset.iops = String((s.read_iops || 0) + (s.write_iops || 0) + (s.other_iops || 0));
        tr.dataset.readIops = String(s.read_iops || 0);
        tr.dataset.writeIops = String(s.write_iops || 0);
      }
      tr.addEventListener('click', (ev) => { if (ev.target.tagName !== 'BUTTON') tr.querySelector('button').click(); });
    }
    fill(exportsBox, t);
  }

  function renderFigures() {
    const s = selected && stats ? stats.exports.find((e) => exportKey(e.type, e.id) === selected) : null;
    const kv = (k, val, testid, sub) => h('div', { 'data-testid': testid }, h('span', { class: 'k' }, k),
      h('span', { class: 'v' }, val), sub ? h('span', { class: 'sub' }, sub) : null);
    fill(figures, s ? [
      kv('IOPS', fmt.count((s.read_iops || 0) + (s.write_iops || 0) + (s.other_iops || 0)), 'fig-iops',
        `read ${fmt.count(s.read_iops)} · write ${fmt.count(s.write_iops)} · other ${fmt.count(s.other_iops)}`),
      kv('read', fmt.rate(s.read_bps), 'fig-read'), kv('write', fmt.rate(s.write_bps), 'fig-write'),
      kv('latency p50', fmt.latency(s.lat_p50_us), 'fig-p50'), kv('latency p99', fmt.latency(s.lat_p99_us), 'fig-p99'),
      kv('CPU', fmt.pct(s.cpu_pct), 'fig-cpu'),
    ] : []);
    figures.hidden = !s;
  }

  function renderPools() {
    fill(poolsBox, table([
      { label: 'Pool', cell: (p) => h('strong', {}, p.name) },
      { label: 'Layout', cell: (p) => `${p.layout} · ${(p.members || []).length} disks` },
      { label: 'Health', cell: (p) => stateBadge(p.state) },
      { label: 'Capacity', cell: poolCapacity },
      { label: 'Free', cell: freeCell },
    ], cfg.volumesList && cfg.datasetsList ? withSpace(cfg.pools, cfg.volumesList, cfg.datasetsList) : cfg.pools, { testid: 'dash-pools-table', rowId: (p) => `dash-pool-${p.name}`, empty: cfg.loaded.pools ? 'No pools yet.' : 'pool list not loaded (nasd unreachable?)' }));
  }

  // One poll at a time; a request for another while busy runs right after.
  let busy = false, again = false;
  async function poll() {
    if (busy) { again = true; return; }
    busy = true;
    clearTimeout(timer);
    try {
      await pollOnce();
    } finally {
      busy = false;
    }
    if (!alive) return;
    if (again) { again = false; poll(); return; }
    timer = setTimeout(poll, TICK_MS);
  }

  async function pollOnce() {
    if (tick++ % CONFIG_EVERY === 0) {
      await loadConfig();
      fill(summaryBox, summary(cfg));
      renderPools();
    }
    let hist = null;
    try {
      [stats, hist] = await Promise.all([get('stats'),
        selected ? get(`stats/history?export=${encodeURIComponent(selected)}&range=${range}`) : null]);
      statsError = null;
    } catch (e) {
      statsError = e.unreachable ? null : e.message; // unreachable: the banner says it, the last figures stay
      if (e.unreachable) hist = undefined;
    }
    if (!alive) return;
    notice.hidden = !statsError;
    fill(notice, statsError ? `Live statistics unavailable: ${statsError}` : '');
    renderExports();
    renderFigures();
    const name = selected ? [...cfg.iscsi.map((x) => ['iscsi', x]), ...cfg.nfs.map((x) => ['nfs', x])]
      .find(([t, x]) => exportKey(t, x.id) === selected) : null;
    fill(chartTitle, name ? `I/O history — ${name[0] === 'iscsi' ? 'iSCSI' : 'NFS'} ${name[1].name}` : 'I/O history');
    if (!selected) {
      fill(chartBox, h('p', { class: 'muted' }, 'Create an export to see its I/O here.'));
      fill(tputBox); fill(latBox);
    } else if (!statsError && hist !== undefined) {
      // viewBox near the rendered width keeps the text at its natural size (phones too)
      const c = historyCharts(hist, `${chartTitle.textContent} (${rangeSel.selectedOptions[0].textContent})`,
        Math.max(320, chartBox.clientWidth || 1000), Math.max(300, tputBox.clientWidth || 480));
      fill(chartBox, c.iops); fill(tputBox, c.tput); fill(latBox, c.lat);
    } else if (!chartBox.firstChild) fill(chartBox, lineChart({ series: [], empty: 'statistics unavailable', height: 230 }));
  }

  await poll();
  return () => { alive = false; clearTimeout(timer); };
}
