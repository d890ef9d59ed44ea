// Snapshots: point-in-time copies of volumes and datasets (create, roll back, clone,
// delete), periodic snapshot tasks with retention, and replication tasks to another nasd.
import { h, fill } from '../dom.js';
import { get, post, patch, del, key } from '../api.js';
import * as fmt from '../format.js';
import * as v from '../validate.js';
import { field, input, select, errorBox, onSubmit, table, action, section, button, loadFailed } from '../ui.js';

const when = (t) => (t ? new Date(t * 1000).toLocaleString() : '—');
const every = (s) => (s % 86400 === 0 ? `${s / 86400}d` : s % 3600 === 0 ? `${s / 3600}h` : s % 60 === 0 ? `${s / 60}m` : `${s}s`);

// [{ value: 'volume:pool/name', label }] for every volume and dataset
async function sources() {
  let failed = null; // a list that could not be read is not an empty one
  const [vols, dss] = await Promise.all([get('volumes'), get('datasets')].map((p) => p.catch((e) => { failed = e.message; return []; })));
  if (failed) return Object.assign([], { failed });
  return [...vols.map((x) => ({ value: `volume:${x.full_name}`, label: `volume ${x.full_name}` })),
    ...dss.map((x) => ({ value: `dataset:${x.full_name}`, label: `dataset ${x.full_name}` }))];
}
// Edit a task's schedule and retention with two prompts; PATCH only what changed.
async function editTask(path, x, refresh) {
  const e = window.prompt('Every (e.g. 15m, 1h, 1d)', every(x.interval_s));
  if (e === null) return;
  const k = window.prompt('Keep (newest snapshots)', String(x.keep));
  if (k === null) return;
  if (!/^[1-9][0-9]{0,3}$/.test(k.trim())) { window.alert('keep must be a number 1..1000'); return; }
  const body = {};
  if (e.trim() !== every(x.interval_s)) body.every = /^[0-9]+$/.test(e.trim()) ? Number(e.trim()) : e.trim();
  if (Number(k.trim()) !== x.keep) body.keep = Number(k.trim());
  if (!Object.keys(body).length) return;
  await action(() => patch(`${path}/${x.id}`, body), { ok: 'task updated', refresh });
}
const splitSource = (s) => { const i = s.indexOf(':'); return { kind: s.slice(0, i), full: s.slice(i + 1) }; };
const base = (src) => { const { kind, full } = splitSource(src); const [pool, ...n] = full.split('/'); return `${kind}s/${key(pool, n.join('/'))}`; };

function snapshotsSection(srcs) {
  const pick = select({ id: 'snap-source', name: 'source', 'aria-label': 'volume or dataset' },
    srcs.length ? srcs : [{ value: '', label: srcs.failed ? '(volumes and datasets not loaded)' : '(no volumes or datasets)' }]);
  const listBox = h('div', { id: 'snapshots-list' });
  const refresh = async () => {
    if (!pick.value) {
      fill(listBox, srcs.failed ? h('div', { class: 'error load-error', role: 'alert', 'data-testid': 'load-error' },
        `cannot list volumes and datasets: ${srcs.failed}`) : h('p', { class: 'sub' }, 'Create a volume or dataset first.'));
      return;
    }
    const b = base(pick.value);
    try {
      const rows = await get(`${b}/snapshots`);
      fill(listBox, table([
        { label: 'Snapshot', cell: (x) => h('strong', {}, x.name) },
        { label: 'Created', cell: (x) => when(x.created) },
        { label: 'Used', class: 'num', cell: (x) => fmt.bytes(x.used) },
        { label: 'Referenced', class: 'num', cell: (x) => fmt.bytes(x.referenced) },
        { label: 'Clones', class: 'num', cell: (x) => String(x.clones) },
        { label: 'Exports', class: 'num', cell: (x) => String(x.exports) },
        { label: 'Actions', cell: (x) => h('div', { class: 'actions' },
          button('Roll back', { class: 'btn small danger', 'data-testid': `snap-rollback-${x.name}`,
            onclick: () => action(() => post(`${b}/snapshots/${key(x.name)}/rollback`, { force: true }),
              { confirmText: `Roll ${splitSource(pick.value).full} back to ${x.name}? Newer data is lost; clients of its exports see the change.`, ok: `rolled back to ${x.name}`, refresh }) }),
          button('Clone', { class: 'btn small', 'data-testid': `snap-clone-${x.name}`, onclick: () => {
            const n = window.prompt(`Name of the clone of ${x.name}`);
            if (n === null) return;
            const problem = v.name(n.trim(), 'clone name');
            if (problem) { window.alert(problem); return; }
            action(() => post(`${b}/snapshots/${key(x.name)}/clone`, { name: n.trim() }), { ok: `clone ${n.trim()} created`, refresh });
          } }),
          button('Delete', { class: 'btn small danger', 'data-testid': `snap-delete-${x.name}`,
            onclick: () => action(() => del(`${b}/snapshots/${key(x.name)}`), { confirmText: `Delete snapshot ${x.name}?`, ok: `snapshot ${x.name} deleted`, refresh }) })) },
      ], rows, { testid: 'snapshots-table', rowId: (x) => `snap-row-${x.name}`, empty: 'No snapshots yet.' }));
    } catch (e) {
      loadFailed(listBox, e, 'list snapshots');
    }
  };
  pick.addEventListener('change', refresh);
  const name = input({ id: 'snap-name', name: 'name', placeholder: 'before-upgrade', maxlength: 63 });
  const err = errorBox('snapshot-form-error');
  const form = h('form', { class: 'grid', id: 'snapshot-form', 'aria-label': 'Create snapshot', novalidate: true },
    field('Of', pick), field('Name', name, 'letters, digits, _ . : -'),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'snapshot-create' }, 'Take snapshot')),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => (!pick.value ? 'nothing to snapshot yet' : null) || v.name(name.value.trim(), 'snapshot name'),
    run: () => post(`${base(pick.value)}/snapshots`, { name: name.value.trim() }),
    done: async () => { name.value = ''; await refresh(); },
  });
  return { box: h('div', {}, form, listBox), refresh };
}

function sourceBody(src) {
  const { kind, full } = splitSource(src);
  return { [kind]: full };
}

function tasksSection(srcs) {
  const listBox = h('div', { id: 'snapshot-tasks-list' });
  const refresh = async () => {
    try {
      const rows = await get('snapshot-tasks');
      fill(listBox, table([
        { label: 'Of', cell: (x) => `${x.kind} ${x.pool}/${x.name}` },
        { label: 'Every', cell: (x) => every(x.interval_s) },
        { label: 'Keep', class: 'num', cell: (x) => String(x.keep) },
        { label: 'Names', cell: (x) => `${x.prefix}-…` },
        { label: 'Last run', cell: (x) => h('div', {}, when(x.last_run), x.last_error ? h('span', { class: 'sub error' }, x.last_error) : null) },
        { label: 'Actions', cell: (x) => h('div', { class: 'actions' },
          button('Run now', { class: 'btn small', onclick: () => action(() => post(`snapshot-tasks/${x.id}/run`), { ok: 'task started', refresh }) }),
          button('Edit', { class: 'btn small', 'data-testid': `task-edit-${x.id}`, onclick: () => editTask('snapshot-tasks', x, refresh) }),
          button(x.enabled ? 'Disable' : 'Enable', { class: 'btn small', onclick: () => action(() => patch(`snapshot-tasks/${x.id}`, { enabled: !x.enabled }), { refresh }) }),
          button('Delete', { class: 'btn small danger', onclick: () => action(() => del(`snapshot-tasks/${x.id}`), { confirmText: 'Delete this task? Its snapshots stay.', ok: 'task deleted', refresh }) })) },
      ], rows, { testid: 'snapshot-tasks-table', empty: 'No periodic snapshots.' }));
    } catch (e) {
      loadFailed(listBox, e, 'list tasks');
    }
  };
  const src = select({ id: 'task-source', name: 'source' }, srcs);
  const ev = select({ id: 'task-every', name: 'every' }, ['15m', '1h', '1d', '7d']);
  const keep = input({ id: 'task-keep', name: 'keep', placeholder: '96', size: 5 });
  const prefix = input({ id: 'task-prefix', name: 'prefix', placeholder: 'auto', maxlength: 40 });
  const err = errorBox('task-form-error');
  const form = h('form', { class: 'grid', id: 'task-form', 'aria-label': 'Create snapshot task', novalidate: true },
    field('Of', src), field('Every', ev), field('Keep', keep, 'newest snapshots kept'), field('Name prefix', prefix),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'task-create' }, 'Add task')),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => (!src.value ? 'nothing to snapshot yet' : null)
      || (/^[1-9][0-9]{0,3}$/.test(keep.value.trim()) ? null : 'keep must be a number 1..1000')
      || (prefix.value.trim() ? v.name(prefix.value.trim(), 'prefix') : null),
    run: () => post('snapshot-tasks', { ...sourceBody(src.value), every: ev.value, keep: Number(keep.value.trim()),
      ...(prefix.value.trim() ? { prefix: prefix.value.trim() } : {}) }),
    done: async () => { keep.value = ''; await refresh(); },
  });
  return { box: h('div', {}, listBox, form), refresh };
}

function replicationSection(srcs) {
  const listBox = h('div', { id: 'replication-tasks-list' });
  const refresh = async () => {
    try {
      const rows = await get('replication-tasks');
      fill(listBox, table([
        { label: 'Of', cell: (x) => `${x.kind} ${x.pool}/${x.name}` },
        { label: 'To', cell: (x) => `${x.target_url} ${x.target_pool}/${x.target_name}` },
        { label: 'Every', cell: (x) => every(x.interval_s) },
        { label: 'Keep there', class: 'num', cell: (x) => String(x.keep) },
        { label: 'Last', cell: (x) => h('div', {}, when(x.last_run), x.last_snapshot ? h('span', { class: 'sub' }, x.last_snapshot) : null,
          x.last_error ? h('span', { class: 'sub error' }, x.last_error) : null) },
        { label: 'Actions', cell: (x) => h('div', { class: 'actions' },
          button('Run now', { class: 'btn small', onclick: () => action(() => post(`replication-tasks/${x.id}/run`), { ok: 'replication started', refresh }) }),
          button('Edit', { class: 'btn small', 'data-testid': `repl-edit-${x.id}`, onclick: () => editTask('replication-tasks', x, refresh) }),
          button(x.enabled ? 'Disable' : 'Enable', { class: 'btn small', onclick: () => action(() => patch(`replication-tasks/${x.id}`, { enabled: !x.enabled }), { refresh }) }),
          button('Delete', { class: 'btn small danger', onclick: () => action(() => del(`replication-tasks/${x.id}`), { confirmText: 'Delete this replication task?', ok: 'task deleted', refresh }) })) },
      ], rows, { testid: 'replication-tasks-table', empty: 'No replication.' }));
    } catch (e) {
      loadFailed(listBox, e, 'list replication tasks');
    }
  };
  const src = select({ id: 'repl-source', name: 'source' }, srcs);
  const url = input({ id: 'repl-url', name: 'target_url', placeholder: 'http://10.0.0.2:8080' });
  const token = input({ id: 'repl-token', name: 'target_token', type: 'password', placeholder: 'API token of the target' });
  const tpool = input({ id: 'repl-pool', name: 'target_pool', placeholder: 'backup' });
  const tname = input({ id: 'repl-name', name: 'target_name', placeholder: '(same name)' });
  const ev = select({ id: 'repl-every', name: 'every' }, ['15m', '1h', '1d']);
  const keep = input({ id: 'repl-keep', name: 'keep', placeholder: '2', size: 5 });
  const err = errorBox('repl-form-error');
  const form = h('form', { class: 'grid', id: 'repl-form', 'aria-label': 'Create replication task', novalidate: true },
    field('Of', src), field('Target nasd', url), field('Token', token), field('Target pool', tpool), field('Target name', tname),
    field('Every', ev), field('Keep there', keep, 'replicated snapshots kept on the target'),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'repl-create' }, 'Add replication')),
    h('div', { class: 'full' }, err));
  onSubmit(form, err, {
    check: () => (!src.value ? 'nothing to replicate yet' : null)
      || (/^http:\/\/[^\s/?#]+$/.test(url.value.trim()) ? null : 'target must be http://host:port')
      || v.name(tpool.value.trim(), 'target pool')
      || (tname.value.trim() ? v.name(tname.value.trim(), 'target name') : null)
      || (!keep.value.trim() || /^[1-9][0-9]{0,3}$/.test(keep.value.trim()) ? null : 'keep must be a number 1..1000'),
    run: () => post('replication-tasks', { ...sourceBody(src.value), target_url: url.value.trim(), target_token: token.value,
      target_pool: tpool.value.trim(), ...(tname.value.trim() ? { target_name: tname.value.trim() } : {}), every: ev.value,
      ...(keep.value.trim() ? { keep: Number(keep.value.trim()) } : {}) }),
    done: async () => { token.value = ''; await refresh(); },
  });
  return { box: h('div', {}, listBox, form), refresh };
}

export async function mount(root) {
  const srcs = await sources();
  const snaps = snapshotsSection(srcs), tasks = tasksSection(srcs), repl = replicationSection(srcs);
  fill(root, h('h1', {}, 'Snapshots'), section('Snapshots', snaps.box), section('Periodic snapshots', tasks.box),
    section('Replication', repl.box));
  await Promise.all([snaps.refresh(), tasks.refresh(), repl.refresh()]);
  const timer = setInterval(() => { tasks.refresh(); repl.refresh(); }, 10000);
  return () => clearInterval(timer);
}
