// One pool (#/pools/<name>): health, per-member state and error counters, scrub and
// resilver progress (polled while either runs), member offline/online/replace.
import { h, fill } from '../dom.js';
import { get, post, key } from '../api.js';
import * as fmt from '../format.js';
import * as v from '../validate.js';
import { field, input, select, errorBox, onSubmit, table, stateBadge, action, section, button, progressBar, badge, toast } from '../ui.js';
import { poolCapacity } from './pools.js';
import { withSpace } from '../space.js';

const MEMBER_MIN_SIZE = 64 * 1024 * 1024;
const POLL_MS = 500;

const errorCell = (n) => h('span', { class: n ? 'bad-num' : 'muted' }, fmt.count(n || 0));

function summary(p) {
  const item = (k, val, attrs = {}) => h('div', attrs, h('span', { class: 'k' }, k), h('span', { class: 'v' }, val));
  return h('div', { class: 'kv pool-kv' },
    item('State', stateBadge(p.state), { 'data-testid': 'pool-state' }),
    item('Layout', p.layout),
    item('Size', fmt.bytes(p.size)),
    item('Free', fmt.bytes(p.free), { 'data-testid': 'pool-free' }),
    p.unreserved !== undefined ? item('Unreserved', fmt.bytes(p.unreserved), { 'data-testid': 'pool-unreserved',
      title: `${fmt.bytes(p.reserved)} reserved by ${p.nvolumes} volume(s), ${fmt.bytes(p.held)} held by datasets` }) : null,
    item('Repaired blocks', fmt.count(p.repaired || 0), { 'data-testid': 'pool-repaired' }),
    item('Unrepairable', fmt.count(p.unrepairable || 0), { 'data-testid': 'pool-unrepairable' }));
}

// Scrub and resilver: a progress bar each and what the last run found.
function maintenance(p, startScrub, clearErrors) {
  const sc = p.scrub || {};
  const rs = p.resilver || {};
  const busy = sc.running || rs.running;
  let scrubText;
  if (sc.running) scrubText = `running since ${fmt.date(sc.started)}`;
  else if (sc.finished) scrubText = `finished ${fmt.date(sc.finished)}`;
  else scrubText = 'never run';
  return h('div', { class: 'stack' },
    h('div', { class: 'maint' },
      h('div', { class: 'maint-head' }, h('strong', {}, 'Scrub'),
        badge(sc.running ? 'running' : sc.finished ? 'finished' : 'idle', sc.running ? 'warn' : sc.finished ? 'ok' : 'muted',
          { 'data-testid': 'scrub-status' }),
        h('span', { class: 'muted', 'data-testid': 'scrub-when' }, scrubText),
        h('span', { class: 'muted', 'data-testid': 'scrub-found' },
          sc.started ? `repaired ${fmt.count(sc.repaired || 0)} · unrepairable ${fmt.count(sc.unrepairable || 0)}` : '')),
      sc.started ? progressBar(sc.progress, 'scrub-progress') : null), // never run: no bar at 0 %
    h('div', { class: 'maint' },
      h('div', { class: 'maint-head' }, h('strong', {}, 'Resilver'),
        badge(rs.running ? 'running' : 'idle', rs.running ? 'warn' : 'muted', { 'data-testid': 'resilver-status' }),
        h('span', { class: 'muted' }, rs.running ? 'rebuilding members from redundancy' : 'starts when a member comes online or is replaced'),
        // after an admin offline only what changed meanwhile is rebuilt: say how much
        rs.rebuilt_bytes ? h('span', { class: 'muted', 'data-testid': 'resilver-rebuilt' },
          `${rs.running ? 'rebuilt so far' : 'last run rebuilt'} ${fmt.bytes(rs.rebuilt_bytes)} per member`) : null),
      // no bar while idle: a full bar would claim a resilver that did not run
      rs.running ? progressBar(rs.progress, 'resilver-progress')
        : h('span', { class: 'muted', 'data-testid': 'resilver-idle' }, (p.members || []).some((m) => m.state !== 'ONLINE')
          ? 'not running: a member is not online' : 'not running: all members are in sync')),
    h('div', { class: 'actions' },
      button('Start scrub', { class: 'btn primary', id: 'pool-scrub', disabled: busy, onclick: startScrub }),
      h('span', { class: 'hint muted' }, 'reads every block, checks it and repairs it from redundancy'),
      button('Clear errors', { class: 'btn', id: 'pool-clear', 'data-testid': 'pool-clear', disabled: busy, onclick: clearErrors }),
      h('span', { class: 'hint muted' }, 'resets the error counters; a FAULTED member is resilvered back online')));
}

function membersTable(p, refresh, pickForReplace) {
  const memberAction = (m, op) => action(() => post(`pools/${key(p.name)}/${op}`, { member: m.index }),
    { ok: `member ${m.index} ${op === 'offline' ? 'taken offline' : 'brought online'}`, refresh });
  return table([
    { label: '#', class: 'num', cell: (m) => m.index },
    { label: 'Disk', cell: (m) => h('span', { class: 'mono' }, m.path) },
    { label: 'Size', class: 'num', cell: (m) => (m.size ? fmt.bytes(m.size) : '—') },
    { label: 'State', cell: (m) => stateBadge(m.state) },
    { label: 'Read err', class: 'num', cell: (m) => h('span', { 'data-testid': 'read-errors' }, errorCell(m.read_errors)) },
    { label: 'Write err', class: 'num', cell: (m) => h('span', { 'data-testid': 'write-errors' }, errorCell(m.write_errors)) },
    { label: 'Checksum err', class: 'num', cell: (m) => h('span', { 'data-testid': 'checksum-errors' }, errorCell(m.checksum_errors)) },
    { label: 'Actions', cell: (m) => h('div', { class: 'actions' },
      m.state === 'ONLINE' || m.state === 'RESILVERING'
        ? button('Offline', { class: 'btn small', 'data-testid': `member-offline-${m.index}`, 'aria-label': `take member ${m.index} offline`,
          onclick: () => memberAction(m, 'offline') })
        : button('Online', { class: 'btn small', 'data-testid': `member-online-${m.index}`, 'aria-label': `bring member ${m.index} online`,
          onclick: () => memberAction(m, 'online') }),
      button('Replace…', { class: 'btn small', 'data-testid': `member-replace-${m.index}`, onclick: () => pickForReplace(m.index) })) },
  ], p.members || [], { testid: 'members-table', rowId: (m) => `member-row-${m.index}`, empty: 'no members known' });
}

function replaceForm(p, refresh) {
  const member = select({ id: 'replace-member', name: 'member' },
    (p.members || []).map((m) => ({ value: String(m.index), label: `${m.index}: ${m.path} (${m.state})` })));
  const path = input({ id: 'replace-path', name: 'path', placeholder: '/srv/disks/new.img' });
  const size = input({ id: 'replace-size', name: 'size', placeholder: '1G' });
  const create = h('input', { type: 'checkbox', id: 'replace-create', checked: true });
  const err = errorBox('replace-form-error');
  const form = h('form', { class: 'grid', id: 'replace-form', 'aria-label': 'Replace member disk', novalidate: true },
    field('Member to replace', member),
    h('div', { class: 'span2' }, field('New disk path', path, 'absolute path of a file or block device')),
    h('div', { class: 'stack' }, field('Size', size, 'needed when creating the file'), field('create file', create)),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'replace-submit' }, 'Replace and resilver')),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => v.absPath(path.value.trim(), 'new disk path')
      || (create.checked || size.value.trim() ? v.size(size.value.trim(), 'size', { min: MEMBER_MIN_SIZE }) : null)
      || ((p.members || []).some((m) => m.path === path.value.trim()) ? 'that disk is already a member of this pool' : null),
    run: (extra) => {
      const body = { member: Number(member.value), path: path.value.trim(), create: create.checked, ...extra };
      if (size.value.trim()) body.size = size.value.trim();
      return post(`pools/${key(p.name)}/replace`, body);
    },
    done: async () => { toast(`member ${member.value} replaced; resilver started`, 'ok'); await refresh(); },
  });
  return form;
}

// A pool on a Ceph cluster: where it lives, the cluster's health, and a sync that takes over
// volumes and datasets other gateways created there (no scrub or member disks: the cluster's job).
function cephBox(p, refresh) {
  const c = p.ceph || {};
  const item = (k, val, id) => h('div', { 'data-testid': id }, h('span', { class: 'k' }, k), h('span', { class: 'v mono', style: 'overflow-wrap: anywhere; font-size: 0.85em' }, String(val ?? '—')));
  return h('div', {},
    h('div', { class: 'kv pool-kv' }, item('Monitors', c.monitors, 'ceph-monitors'), item('RADOS pool', c.pool, 'ceph-pool'),
      item('cephx user', c.user, 'ceph-user'), item('Cluster health', c.health, 'ceph-health'),
      item('RADOS objects', c.objects, 'ceph-objects'), item('Cluster fsid', c.fsid, 'ceph-fsid')),
    h('p', { class: 'muted hint-p' }, 'Volumes and datasets are RBD images in the RADOS pool; other nasd gateways attach with Import.'),
    button('Sync from cluster', { id: 'ceph-sync', class: 'btn small',
      onclick: () => action(() => post(`pools/${key(p.name)}/sync`), { ok: 'synced with the cluster record', refresh }) }));
}

export async function mount(root, name) {
  let timer = null;
  let disposed = false;
  const head = h('div', { class: 'page-head' }, h('a', { href: '#/pools', class: 'back' }, '← All pools'));
  const summaryBox = h('div', { id: 'pool-summary' });
  const maintBox = h('div', { id: 'pool-maintenance' });
  const membersBox = h('div', { id: 'pool-members-list' });
  const replaceBox = h('div', { id: 'pool-replace' });
  const cephBoxEl = h('div', { id: 'pool-ceph-info' });
  let replaceBuilt = '';

  const schedule = (p) => {
    clearTimeout(timer);
    const busy = p && ((p.scrub && p.scrub.running) || (p.resilver && p.resilver.running)
      || (p.members || []).some((m) => m.state === 'RESILVERING'));
    if (!disposed && busy)
      timer = setTimeout(refresh, POLL_MS);
  };
  const pickForReplace = (idx) => {
    const sel = replaceBox.querySelector('#replace-member');
    if (sel) { sel.value = String(idx); replaceBox.querySelector('#replace-path').focus(); }
  };
  async function refresh() {
    let p;
    try {
      p = await get(`pools/${key(name)}`);
      const [vols, dsets] = await Promise.all([get('volumes').catch(() => null), get('datasets').catch(() => null)]);
      if (vols && dsets) p = withSpace([{ ...p, name }], vols, dsets)[0];
    } catch (e) {
      if (e.unreachable && summaryBox.querySelector('[data-testid="pool-state"]')) return; // keep the last figures
      fill(summaryBox, h('div', { class: 'error', role: 'alert', 'data-testid': 'pool-load-error' }, `cannot load pool ${name}: ${e.message}`));
      fill(maintBox); fill(membersBox); fill(replaceBox);
      return;
    }
    if (disposed) return;
    // a pool whose engine could not start lists its members without index or counters
    p.members = (p.members || []).map((m, i) => ({ index: i, ...m }));
    const down = (p.members || []).filter((m) => m.state !== 'ONLINE');
    fill(summaryBox, summary(p), poolCapacity(p), p.error ? h('div', { class: 'error', role: 'alert' }, fmt.humanize(p.error)) : null,
      down.length && !p.error ? h('div', { class: 'notice in-card', role: 'status', 'data-testid': 'pool-notice' },
        `${down.map((m) => `member ${m.index} is ${m.state}`).join(', ')}: ${p.state === 'DEGRADED'
          ? 'the pool runs without full redundancy. Bring it online or replace it.' : 'see the member list below.'}`) : null);
    const isCeph = p.backend === 'ceph';
    secMaint.hidden = isCeph; secMembers.hidden = isCeph; secReplace.hidden = isCeph; secCeph.hidden = !isCeph;
    if (isCeph) { fill(cephBoxEl, cephBox({ ...p, name }, refresh)); schedule(p); return; }
    fill(maintBox, maintenance(p, startScrub, clearErrors));
    fill(membersBox, membersTable(p, refresh, pickForReplace));
    // rebuild the replace form only when the member list changed, so typing is not lost while polling
    const sig = (p.members || []).map((m) => `${m.path}:${m.state}`).join('|');
    if (sig !== replaceBuilt) {
      const keep = replaceBox.querySelector('#replace-member')?.value;
      fill(replaceBox, replaceForm(p, refresh));
      if (keep !== undefined && replaceBox.querySelector(`#replace-member option[value="${keep}"]`))
        replaceBox.querySelector('#replace-member').value = keep;
      replaceBuilt = sig;
    }
    schedule(p);
  }
  async function startScrub() {
    await action(() => post(`pools/${key(name)}/scrub`), { ok: `scrub of ${name} started`, refresh });
  }
  async function clearErrors() {
    await action(() => post(`pools/${key(name)}/clear`), { ok: `errors of ${name} cleared`, refresh });
  }

  const secMaint = section('Scrub and resilver', maintBox);
  const secMembers = section('Member disks', membersBox);
  const secReplace = section('Replace a member disk', h('p', { class: 'muted hint-p' },
    'The new disk takes the old one\'s place and is rebuilt from the other members (resilver).'), replaceBox);
  const secCeph = section('Ceph cluster', cephBoxEl);
  secCeph.hidden = true;
  fill(root, head, h('h1', {}, `Pool ${name}`), section('Health', summaryBox), secCeph, secMaint, secMembers, secReplace);
  await refresh();
  return () => { disposed = true; clearTimeout(timer); };
}
