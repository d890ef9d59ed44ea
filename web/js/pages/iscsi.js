// iSCSI exports: targets whose LUNs are volumes; CHAP and initiator ACL; enable/disable; delete.
import { h, fill } from '../dom.js';
import { get, post, patch, del, key } from '../api.js';
import * as fmt from '../format.js';
import * as v from '../validate.js';
import { field, input, errorBox, onSubmit, table, action, section, button, badge } from '../ui.js';

export function exportStatus(x) {
  const attrs = { 'data-testid': 'status' };
  if (!x.enabled) return badge('disabled', 'muted', attrs);
  return x.active ? badge('active', 'ok', attrs) : badge('enabled, not active', 'warn', attrs);
}

function lunChecklist(volumes) {
  if (!volumes.length) return h('div', { class: 'checklist muted', id: 'iscsi-luns' }, 'no volumes — create one first');
  return h('div', { class: 'checklist', id: 'iscsi-luns', role: 'group', 'aria-label': 'Volumes to export as LUNs' },
    volumes.map((vol) => h('label', {},
      h('input', { type: 'checkbox', name: 'lun', value: vol.full_name, 'data-testid': `iscsi-lun-${vol.full_name}` }),
      `${vol.full_name} (${fmt.bytes(vol.size)}, ${vol.block_size} B)`)));
}

function createForm(volumes, refresh) {
  const name = input({ id: 'iscsi-name', name: 'name', placeholder: 't1', maxlength: 64 });
  const iqn = input({ id: 'iscsi-iqn', name: 'iqn', placeholder: 'default iqn.2026-12.io.nasd:<name>' });
  const luns = lunChecklist(volumes);
  const chapUser = input({ id: 'iscsi-chap-user', name: 'chap_user', placeholder: 'none' });
  const chapSecret = input({ id: 'iscsi-chap-secret', name: 'chap_secret', type: 'password', autocomplete: 'new-password' });
  const mutualUser = input({ id: 'iscsi-mutual-user', name: 'mutual_user', placeholder: 'none' });
  const mutualSecret = input({ id: 'iscsi-mutual-secret', name: 'mutual_secret', type: 'password', autocomplete: 'new-password' });
  const inits = h('textarea', { id: 'iscsi-initiators', name: 'initiators', placeholder: 'iqn.1994-05.com.redhat:client1\n(empty: any initiator)' });
  const enabled = h('input', { type: 'checkbox', id: 'iscsi-enabled', checked: true });
  const err = errorBox('iscsi-form-error');
  const form = h('form', { class: 'grid', id: 'iscsi-form', 'aria-label': 'Create iSCSI export', novalidate: true },
    field('Name', name, 'letters, digits, _ . : -'),
    h('div', { class: 'span2' }, field('Target IQN', iqn, 'optional')),
    field('Enabled', enabled),
    h('div', { class: 'full field' }, h('span', { class: 'label', id: 'iscsi-luns-label' }, 'LUNs (in order: LUN 0, 1, ...)'), luns),
    field('CHAP user', chapUser, 'optional'), field('CHAP secret', chapSecret, '12..16 characters'),
    field('Mutual CHAP user', mutualUser, 'optional'), field('Mutual CHAP secret', mutualSecret, 'differs from CHAP secret'),
    h('div', { class: 'full' }, field('Allowed initiators', inits, 'one IQN per line; empty allows any initiator')),
    h('div', { class: 'actions full' }, h('button', { type: 'submit', id: 'iscsi-create' }, 'Create iSCSI export')),
    h('div', { class: 'full' }, err));
  const chosen = () => [...luns.querySelectorAll('input[name=lun]:checked')].map((c) => c.value);
  onSubmit(form, err, {
    check: () => v.name(name.value.trim(), 'export name')
      || (iqn.value.trim() ? v.iqn(iqn.value.trim(), 'target IQN') : null)
      || (chosen().length ? null : 'pick at least one volume as LUN')
      || v.chap(chapUser.value, chapSecret.value, 'CHAP') || v.chap(mutualUser.value, mutualSecret.value, 'mutual CHAP')
      || (mutualUser.value && !chapUser.value ? 'mutual CHAP needs one-way CHAP too' : null)
      || (chapSecret.value && chapSecret.value === mutualSecret.value ? 'mutual secret must differ from the CHAP secret' : null)
      || v.list(inits.value).map((i) => v.iqn(i, 'initiator')).find(Boolean) || null,
    run: () => {
      const body = { name: name.value.trim(), luns: chosen().map((vol, lun) => ({ lun, volume: vol })),
        initiators: v.list(inits.value), enabled: enabled.checked };
      if (iqn.value.trim()) body.iqn = iqn.value.trim();
      if (chapUser.value) Object.assign(body, { chap_user: chapUser.value, chap_secret: chapSecret.value });
      if (mutualUser.value) Object.assign(body, { mutual_user: mutualUser.value, mutual_secret: mutualSecret.value });
      return post('exports/iscsi', body);
    },
    done: async () => { form.reset(); enabled.checked = true; await refresh(); },
  });
  return form;
}

export async function mount(root) {
  const volumes = await get('volumes').catch(() => []);
  const listBox = h('div', { id: 'iscsi-list' });
  const refresh = async () => {
    try {
      const rows = await get('exports/iscsi');
      fill(listBox, table([
        { label: 'Name', cell: (x) => h('div', {}, h('strong', {}, x.name), h('span', { class: 'sub mono' }, x.iqn)) },
        { label: 'LUNs', cell: (x) => h('div', {}, x.luns.map((l) => h('span', { class: 'sub' }, `LUN ${l.lun}: ${l.volume} (${fmt.bytes(l.size)})`))) },
        { label: 'CHAP', cell: (x) => (x.chap_user ? `${x.chap_user}${x.mutual_user ? ` + mutual ${x.mutual_user}` : ''}` : 'none') },
        { label: 'Initiators', cell: (x) => (x.initiators && x.initiators.length
          ? h('div', {}, x.initiators.map((i) => h('span', { class: 'sub mono' }, i))) : 'any') },
        { label: 'Portal', cell: (x) => h('span', { class: 'mono' }, x.portal || '—') },
        { label: 'Status', cell: exportStatus },
        { label: 'Actions', cell: (x) => h('div', { class: 'actions' },
          button(x.enabled ? 'Disable' : 'Enable', { class: 'btn small', 'data-testid': `iscsi-toggle-${x.name}`,
            onclick: () => action(() => patch(`exports/iscsi/${key(x.name)}`, { enabled: !x.enabled }), { ok: `${x.name} ${x.enabled ? 'disabled' : 'enabled'}`, refresh }) }),
          button('Delete', { class: 'btn small danger', 'data-testid': `iscsi-delete-${x.name}`,
            onclick: () => action(() => del(`exports/iscsi/${key(x.name)}`), { confirmText: `Delete iSCSI export ${x.name}? Initiators lose access.`, ok: `${x.name} deleted`, refresh }) })) },
      ], rows, { testid: 'iscsi-table', rowId: (x) => `iscsi-row-${x.name}`, empty: 'No iSCSI exports yet.' }));
    } catch (e) {
      fill(listBox, h('div', { class: 'error', role: 'alert' }, `cannot list iSCSI exports: ${e.message}`));
    }
  };
  fill(root, h('h1', {}, 'iSCSI exports'), section('Targets', listBox), section('Create iSCSI export', createForm(volumes, refresh)));
  await refresh();
}
