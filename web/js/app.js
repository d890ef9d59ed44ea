// Hash router: #/page[/arg]. Each page module exports mount(root, arg) -> dispose().
import { h, fill } from './dom.js';
import { get } from './api.js';
import * as fmt from './format.js';

const pages = {
  dashboard: () => import('./pages/dashboard.js'),
  pools: () => import('./pages/pools.js'),
  datasets: () => import('./pages/datasets.js'),
  volumes: () => import('./pages/volumes.js'),
  iscsi: () => import('./pages/iscsi.js'),
  nfs: () => import('./pages/nfs.js'),
  selftest: () => import('./pages/selftest.js'),
};

let dispose = null;
let routeSeq = 0;

async function route() {
  const [, name = 'dashboard', ...rest] = (location.hash || '#/dashboard').split('/');
  const page = pages[name] ? name : 'dashboard';
  const seq = ++routeSeq;
  if (dispose) { dispose(); dispose = null; }
  document.getElementById('toasts').replaceChildren(); // notices belong to the page they came from
  for (const a of document.querySelectorAll('nav.side a')) {
    if (a.getAttribute('href') === `#/${page}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const main = document.getElementById('main');
  const root = h('div', { class: 'page', 'data-page': page });
  fill(main, root);
  const mod = await pages[page]();
  if (seq !== routeSeq) return; // navigated again while loading
  dispose = (await mod.mount(root, rest.map(decodeURIComponent).join('/'))) || null;
  document.title = `nasd · ${root.querySelector('h1')?.textContent || page}`;
}

async function systemInfo() {
  const el = document.getElementById('sysinfo');
  try {
    const s = await get('system');
    const svc = (label, up) => h('span', { class: `badge ${up ? 'ok' : 'muted'}` }, `${label} ${up ? 'up' : 'off'}`);
    fill(el, h('span', {}, `${s.hostname} · v${s.version} · up ${fmt.duration(s.uptime)}`),
      svc('iSCSI', s.iscsi.running), svc('NFS', s.nfs.running));
  } catch (e) {
    fill(el, h('span', { class: 'badge bad' }, `nasd unreachable: ${e.message}`));
  }
}

// Phones: the menu is hidden behind a button; choosing a page closes it again.
function setupMenu() {
  const btn = document.getElementById('menu-toggle');
  const nav = document.getElementById('nav');
  const show = (open) => { nav.classList.toggle('open', open); btn.setAttribute('aria-expanded', String(open)); };
  btn.addEventListener('click', () => show(!nav.classList.contains('open')));
  nav.addEventListener('click', (ev) => { if (ev.target.closest('a')) show(false); });
}

setupMenu();
window.addEventListener('hashchange', route);
route();
systemInfo();
setInterval(systemInfo, 10000);
