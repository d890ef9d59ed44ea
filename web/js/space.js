// Pool space as nasd accounts it when creating a volume (storage/manager/storage.c reserve()):
// volumes reserve their full size, datasets hold what they have allocated; what is left is
// "unreserved". "free" is the pool's unallocated space (volumes are thin until written).
import { h } from './dom.js';
import { get } from './api.js';
import * as fmt from './format.js';

// pools annotated with reserved (volumes), volume count, held (datasets) and unreserved.
export function withSpace(pools, volumes, datasets) {
  return pools.map((p) => {
    const vols = (volumes || []).filter((v) => v.pool === p.name);
    const reserved = vols.reduce((s, v) => s + (v.size || 0), 0);
    const held = (datasets || []).filter((d) => d.pool === p.name).reduce((s, d) => s + (d.allocated || 0), 0);
    return { ...p, reserved, nvolumes: vols.length, held, unreserved: Math.max(0, (p.size || 0) - reserved - held) };
  });
}

// GET pools, volumes and datasets together; pools come back annotated.
export async function poolsWithSpace() {
  const [pools, volumes, datasets] = await Promise.all([get('pools'), get('volumes'), get('datasets')]);
  return withSpace(pools, volumes, datasets);
}

// Cell: free space, with what volumes reserve and what is left unreserved below it.
export function freeCell(p) {
  return h('div', { class: 'cap', 'data-testid': `pool-free-${p.name}` },
    h('span', { 'data-field': 'free' }, `${fmt.bytes(p.free)} free`),
    p.reserved !== undefined ? h('span', { class: 'sub', 'data-field': 'reserved' }, p.nvolumes
      ? `${fmt.bytes(p.reserved)} reserved by ${p.nvolumes} volume${p.nvolumes === 1 ? '' : 's'}` : 'no volume reservations') : null,
    p.unreserved !== undefined ? h('span', { class: 'sub', 'data-field': 'unreserved' }, `${fmt.bytes(p.unreserved)} unreserved`) : null);
}

// <option>s of a pool <select> with each pool's unreserved space; keeps the choice.
export function fillPoolSelect(sel, pools, failed) {
  const keep = sel.value;
  sel.replaceChildren(...(failed ? [h('option', { value: '' }, `pools not loaded: ${failed}`)]
    : pools.length ? pools.map((p) => h('option', { value: p.name },
      `${p.name} (${fmt.bytes(p.unreserved ?? p.free)} ${p.unreserved !== undefined ? 'unreserved' : 'free'})`))
      : [h('option', { value: '' }, 'no pools — create one first')]));
  if (keep && pools.some((p) => p.name === keep)) sel.value = keep;
}
