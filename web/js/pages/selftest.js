// Self-test: run a load pattern against an export (POST .../selftest), follow the job
// (GET /jobs/{id}) with a progress bar, live export figures, result table and timeline.
import { h, fill } from '../dom.js';
import { get, post, key } from '../api.js';
import * as fmt from '../format.js';
import * as v from '../validate.js';
import { lineChart } from '../chart.js';
import { field, input, select, errorBox, onSubmit, table, section, badge, progressBar, loadFailed } from '../ui.js';

const PATTERNS = [
  { value: '4k-randread', label: '4K random read' },
  { value: '512-seqread', label: '512 B sequential read' },
  { value: '4k-randwrite', label: '4K random write, verified' },
  { value: 'metadata', label: 'metadata (NFS only)' },
];
const STATUS_KIND = { running: 'warn', done: 'ok', failed: 'bad' };
// "iscsi:1" -> "iSCSI t1", from the export lists (the job's export_name is used when present).
let exportNames = new Map();
const exportLabel = (job) => {
  const type = String(job.export || '').startsWith('nfs') ? 'NFS' : 'iSCSI';
  const name = typeof job.export_name === 'string' && job.export_name ? job.export_name : exportNames.get(job.export);
  return `${type} ${name || job.export}`;
};
const JOB_POLL_MS = 500;
// A job's outcome: "failed" (with the error and its cause, e.g. NOSPC/quota, EIO, timeout,
// login) or "done" but with I/O errors counted, which is shown as a warning, never as plain done.
const jobStatus = (j) => j.status || j.state;
const jobErrors = (j) => (j.result && j.result.errors) || 0;
function outcome(j) {
  const st = jobStatus(j);
  if (st === 'done' && jobErrors(j) > 0) return { text: `done with ${fmt.count(jobErrors(j))} errors`, kind: 'warn' };
  return { text: st, kind: STATUS_KIND[st] || 'muted' };
}
// selftest/ names these causes; anything else is shown as it comes
const CAUSES = {
  NOSPC: 'the pool is out of space', QUOTA: 'the dataset\'s quota is full', EIO: 'the storage returned I/O errors',
  TIMEOUT: 'requests timed out', LOGIN: 'the iSCSI login failed', CONNECTION: 'the connection to the export was lost',
  INTEGRITY: 'data read back differs from what was written',
};
const causeText = (j) => {
  if (!j.cause) return '';
  const c = typeof j.cause === 'string' ? j.cause : j.cause.message || j.cause.code || JSON.stringify(j.cause);
  return CAUSES[c] ? `${c} — ${CAUSES[c]}` : c;
};

function startForm(iscsi, nfs, listError) {
  const targets = [
    ...iscsi.map((x) => ({ value: `iscsi/${x.name}`, label: `iSCSI ${x.name}${x.enabled ? '' : ' (disabled)'}` })),
    ...nfs.map((x) => ({ value: `nfs/${x.name}`, label: `NFS ${x.name}${x.enabled ? '' : ' (disabled)'}` })),
  ];
  const exp = select({ id: 'st-export', name: 'export' }, targets.length ? targets : [{ value: '', label: listError ? `exports not loaded: ${listError}` : 'no exports — create one first' }]);
  const pattern = select({ id: 'st-pattern', name: 'pattern' }, PATTERNS);
  const seconds = input({ id: 'st-seconds', name: 'seconds', type: 'number', min: 1, max: 300, value: '10' });
  const qd = input({ id: 'st-qd', name: 'queue_depth', type: 'number', min: 1, max: 256, value: '16' });
  const destructive = h('input', { type: 'checkbox', id: 'st-destructive', name: 'destructive' });
  const err = errorBox('selftest-form-error');
  const form = h('form', { class: 'grid', id: 'selftest-form', 'aria-label': 'Start self-test', novalidate: true },
    field('Export', exp), field('Pattern', pattern), field('Seconds', seconds, '1..300'), field('Queue depth', qd, '1..256'),
    h('div', { class: 'full' }, field('Allow overwriting the volume (destructive)', destructive,
      '4k-randwrite on an iSCSI export overwrites the data on its volume; NFS tests use a temporary file')),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'st-start' }, 'Start self-test')),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => {
      const type = exp.value.split('/')[0];
      return (!exp.value ? 'create an export first' : null)
        || v.intRange(seconds.value, 1, 300, 'seconds') || v.intRange(qd.value, 1, 256, 'queue depth')
        || (type === 'iscsi' && pattern.value === 'metadata' ? 'the metadata pattern applies to NFS exports only' : null)
        || (type === 'iscsi' && pattern.value === '4k-randwrite' && !destructive.checked
          ? '4k-randwrite overwrites the volume: tick "Allow overwriting the volume" to run it' : null);
    },
    run: () => {
      const [type, name] = exp.value.split('/');
      const body = { pattern: pattern.value, seconds: Number(seconds.value), queue_depth: Number(qd.value) };
      if (destructive.checked) body.destructive = true;
      return post(`exports/${type}/${key(name)}/selftest`, body);
    },
    done: (job) => { location.hash = `#/selftest/${job.id}`; },
  });
  return form;
}

function resultTable(r) {
  const rows = [
    ['IOPS', fmt.count(r.iops), 'iops'], ['throughput (decimal)', fmt.mbps(r.mbps), 'mbps'],
    ['latency avg', fmt.micros(r.lat_avg_us), 'lat_avg_us'], ['latency p50', fmt.micros(r.lat_p50_us), 'lat_p50_us'],
    ['latency p99', fmt.micros(r.lat_p99_us), 'lat_p99_us'], ['operations', fmt.count(r.ops), 'ops'],
    ['bytes', fmt.bytes(r.bytes), 'bytes'], ['errors', fmt.count(r.errors), 'errors'],
  ];
  return h('table', { class: 'data', 'data-testid': 'st-result' },
    h('caption', { class: 'sr' }, 'Self-test result'),
    h('tbody', {},
      rows.map(([k, val, f]) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', { class: 'num', 'data-field': f }, val))),
      h('tr', {}, h('th', { scope: 'row' }, 'data integrity'),
        h('td', { class: 'num' }, h('span', { 'data-testid': 'st-integrity', class: `badge ${r.integrity === 'ok' ? 'ok' : 'bad'}` }, r.integrity || '—')))));
}

function timelineCharts(tl) {
  const pts = (f) => (tl || []).map((x) => [x.t, x[f] || 0]);
  const xFormat = (t) => `${Math.round(t)} s`;
  return h('div', { class: 'stack' },
    h('div', { 'data-testid': 'st-timeline' },
      lineChart({ series: [{ label: 'IOPS', color: 'var(--read)', fill: true, points: pts('iops') }], xFormat, unit: 'IOPS', title: 'IOPS over time', width: 640, height: 190 })),
    h('div', { 'data-testid': 'st-timeline-mbps' },
      lineChart({ series: [{ label: 'MB/s', color: 'var(--write)', fill: true, points: pts('mbps') }], xFormat, unit: 'MB/s', title: 'Throughput over time (MB/s, 10⁶ bytes/s)', width: 640, height: 190 })));
}

// Panel following one job until it finishes; returns a stop function.
function followJob(box, id, onFinish) {
  let timer = null, alive = true, lastStats = 0, live = null;
  const tick = async () => {
    let job;
    try {
      job = await get(`jobs/${encodeURIComponent(id)}`);
    } catch (e) {
      fill(box, h('h2', {}, `Job ${id}`), h('div', { class: 'error', role: 'alert', 'data-testid': 'st-error' }, e.message));
      return;
    }
    if (jobStatus(job) === 'running' && Date.now() - lastStats >= 1000) {
      lastStats = Date.now();
      const st = await get('stats').catch(() => null);
      live = st ? st.exports.find((e) => `${e.type}:${e.id}` === job.export) : null;
    }
    if (!alive) return;
    const kv = (k, val) => h('div', {}, h('span', { class: 'k' }, k), h('span', { class: 'v' }, val));
    fill(box,
      h('div', { class: 'chart-head' },
        h('h2', {}, `Job ${job.id}: ${job.pattern} on ${exportLabel(job)}`),
        h('span', { class: `badge ${STATUS_KIND[jobStatus(job)] || 'muted'}`, 'data-testid': 'st-status' }, jobStatus(job))),
      h('p', { class: 'muted' }, `${job.seconds} s at queue depth ${job.queue_depth} · started ${fmt.date(job.started)}`
        + (job.finished ? ` · finished ${fmt.date(job.finished)}` : '')),
      progressBar(jobStatus(job) === 'done' ? 1 : job.progress, 'st-progress'),
      jobStatus(job) === 'running' && live ? h('div', { class: 'kv', 'data-testid': 'st-live', style: 'margin-top:10px' },
        kv('export IOPS', fmt.count((live.read_iops || 0) + (live.write_iops || 0) + (live.other_iops || 0))),
        kv('read', fmt.rate(live.read_bps)), kv('write', fmt.rate(live.write_bps)),
        kv('latency p50', fmt.latency(live.lat_p50_us)), kv('latency p99', fmt.latency(live.lat_p99_us)), kv('CPU', fmt.pct(live.cpu_pct))) : null,
      job.error || jobStatus(job) === 'failed' ? h('div', { class: 'error failed-job', role: 'alert', 'data-testid': 'st-error' },
        h('strong', {}, 'Self-test failed: '), fmt.humanize(job.error || 'no reason given'),
        causeText(job) ? h('div', { 'data-testid': 'st-cause' }, `cause: ${fmt.humanize(causeText(job))}`) : null,
        job.result && job.result.first_error ? h('div', { class: 'mono', 'data-testid': 'st-first-error' },
          `first error: ${fmt.humanize(job.result.first_error)}`) : null) : null,
      jobStatus(job) === 'done' && jobErrors(job) > 0 ? h('div', { class: 'notice in-card', role: 'status', 'data-testid': 'st-warning' },
        `${fmt.count(jobErrors(job))} of ${fmt.count(job.result.ops)} operations failed: the figures are not a clean run.`) : null,
      job.result ? h('div', { class: 'row', style: 'margin-top:12px' },
        h('div', { class: 'result-col' }, resultTable(job.result)), h('div', { class: 'grow timeline-col' }, timelineCharts(job.timeline)))
        : (job.timeline && job.timeline.length ? h('div', { style: 'margin-top:12px' }, timelineCharts(job.timeline)) : null));
    if (jobStatus(job) === 'running') timer = setTimeout(tick, JOB_POLL_MS);
    else onFinish();
  };
  fill(box, h('h2', {}, `Job ${id}`), h('p', { class: 'muted' }, 'loading…'));
  tick();
  return () => { alive = false; clearTimeout(timer); };
}

async function jobsTable(box) {
  try {
    const jobs = await get('jobs');
    const list = Array.isArray(jobs) ? jobs : (jobs && jobs.jobs) || [];
    fill(box, table([
      { label: 'Job', cell: (j) => h('a', { href: `#/selftest/${j.id}`, 'data-testid': `job-link-${j.id}` }, `#${j.id}`) },
      { label: 'Export', cell: exportLabel },
      { label: 'Pattern', cell: (j) => `${j.pattern} · ${j.seconds}s · QD ${j.queue_depth}` },
      { label: 'Started', cell: (j) => fmt.date(j.started) },
      { label: 'Status', cell: (j) => h('div', {}, badge(outcome(j).text, outcome(j).kind, { 'data-testid': 'job-status' }),
        jobStatus(j) === 'failed' ? h('span', { class: 'sub bad-text', 'data-testid': 'job-cause' },
          fmt.humanize(causeText(j) || j.error || 'failed')) : null) },
      { label: 'IOPS', class: 'num', cell: (j) => (j.result ? fmt.count(j.result.iops) : '—') },
      { label: 'Integrity', cell: (j) => (j.result ? j.result.integrity : '—') },
    ], [...list].sort((a, b) => (b.started || 0) - (a.started || 0)).slice(0, 20),
    { testid: 'jobs-table', rowId: (j) => `job-row-${j.id}`, empty: 'No self-tests run yet.' }));
    for (const tr of box.querySelectorAll('tr[data-testid^="job-row-"]')) {
      const j = list.find((x) => `job-row-${x.id}` === tr.dataset.testid);
      if (j && jobStatus(j) === 'failed') tr.classList.add('failed-row');
      else if (j && outcome(j).kind === 'warn' && jobStatus(j) === 'done') tr.classList.add('warn-row');
    }
  } catch (e) {
    loadFailed(box, e, 'list jobs');
  }
}

export async function mount(root, jobId) {
  let listError = null;
  const failed = (e) => { listError = e.message; return []; };
  const [iscsi, nfs] = await Promise.all([get('exports/iscsi').catch(failed), get('exports/nfs').catch(failed)]);
  exportNames = new Map([...iscsi.map((x) => [`iscsi:${x.id}`, x.name]), ...nfs.map((x) => [`nfs:${x.id}`, x.name])]);
  const jobBox = h('section', { class: 'card', id: 'st-job', 'data-testid': 'st-job', 'aria-live': 'polite' });
  const jobsBox = h('div', { id: 'jobs-list' });
  fill(root, h('h1', {}, 'Self-test'),
    section('Start a self-test', h('p', { class: 'muted' }, 'Runs a load generator inside nasd against the export and verifies the data it reads back.'),
      startForm(iscsi, nfs, listError)),
    jobId ? jobBox : null,
    section('Recent self-tests', jobsBox));
  const stop = jobId ? followJob(jobBox, jobId, () => jobsTable(jobsBox)) : null;
  if (jobId) { // offer a re-run of the shown job: preselect its export and settings
    get(`jobs/${encodeURIComponent(jobId)}`).then((job) => {
      const [type, id] = String(job.export).split(':');
      const x = (type === 'nfs' ? nfs : iscsi).find((e) => String(e.id) === id);
      const set = (sel, val) => { const el = root.querySelector(sel); if (el && val !== undefined && val !== null) el.value = String(val); };
      if (x) set('#st-export', `${type}/${x.name}`);
      set('#st-pattern', job.pattern);
      set('#st-seconds', job.seconds);
      set('#st-qd', job.queue_depth);
    }).catch(() => {});
  }
  await jobsTable(jobsBox);
  return () => { if (stop) stop(); };
}
