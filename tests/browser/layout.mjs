// Layout and presentation of the nasd web UI. Seeds data with 62-character names over REST,
// then: at 390x844 (phone) every page, the pool page and a job page have no horizontal
// overflow and the menu sits behind a toggle; at 1280x800 the long names do not push any
// table out of its card. Pages are served with a strict CSP (no inline styles): no violations.
//   node layout.mjs --url http://127.0.0.1:8080 --tmp DIR --shots DIR
import path from 'node:path';
import { parseArgs } from 'node:util';
import { begin, check, log, until, launch, rest, overflowReport, step } from './lib.mjs';

const { values: opt } = parseArgs({ options: { url: { type: 'string' }, tmp: { type: 'string' }, shots: { type: 'string' } } });
const base = opt.url.replace(/\/$/, '');
const R = (m, p, b) => rest(base, m, p, b);
const long = (prefix) => (prefix + '_' + 'x'.repeat(62)).slice(0, 62);
const POOL = long('pool'), VOL = long('vol'), DS = long('share'), TGT = long('target'), NFS = long('nfsexport');

let ok = false;
let b = null;
try {
  begin('seed a mirror pool, a volume, a dataset and two exports with 62-character names');
  await R('POST', 'pools', { name: POOL, layout: 'mirror',
    members: [1, 2].map((i) => ({ path: path.join(opt.tmp, `m${i}.img`), size: '128M', create: true })) });
  await R('POST', 'volumes', { pool: POOL, name: VOL, size: '64M', block_size: 512 });
  await R('POST', 'datasets', { pool: POOL, name: DS, quota: '32M', comment: 'a comment that is rather long '.repeat(3) });
  await R('POST', 'exports/iscsi', { name: TGT, luns: [{ lun: 0, volume: `${POOL}/${VOL}` }] });
  await R('POST', 'exports/nfs', { name: NFS, dataset: `${POOL}/${DS}`, clients: ['127.0.0.0/8', '192.168.100.0/24'] });
  await R('POST', `volumes/${POOL}/${VOL}/snapshots`, { name: long('snap') }).catch((e) => log(`  no snapshot seeded: ${e.message}`));
  const job = await R('POST', `exports/iscsi/${TGT}/selftest`, { pattern: '4k-randread', seconds: 1, queue_depth: 4 });
  await until(async () => (await R('GET', `jobs/${job.id}`)).status !== 'running', 'seed self-test to end', 20000, 300);

  const pages = ['dashboard', 'pools', `pools/${POOL}`, 'datasets', 'volumes', 'iscsi', 'nfs', 'snapshots', 'selftest', `selftest/${job.id}`];
  for (const [w, hgt, label] of [[390, 844, 'phone'], [1280, 800, 'desktop']]) {
    begin(`${label} ${w}x${hgt}: no page overflows horizontally`);
    b = await launch({ width: w, height: hgt });
    const { page } = b;
    // The UI must run under a strict CSP (no inline styles or scripts): the document is served
    // with one here and every violation is recorded.
    await page.route(`${base}/`, async (route) => {
      const res = await route.fetch();
      await route.fulfill({ response: res, headers: { ...res.headers(), 'content-security-policy':
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'" } });
    });
    await page.addInitScript(() => {
      window.cspViolations = [];
      document.addEventListener('securitypolicyviolation', (e) => window.cspViolations.push(`${e.violatedDirective}: ${e.blockedURI || e.sample}`));
    });
    for (const p of pages) {
      await page.goto(`${base}/#/${p}`);
      await page.locator('main h1').waitFor();
      await page.waitForLoadState('networkidle').catch(() => {});
      await page.waitForTimeout(250); // late renders (charts, polled lists)
      const r = await overflowReport(page);
      await page.screenshot({ path: path.join(opt.shots, `${label}-${p.replace(/\W+/g, '_').slice(0, 40)}.png`), fullPage: true });
      check(r.scrollWidth <= r.innerWidth, `${label} #/${p}: document ${r.scrollWidth} px wide in a ${r.innerWidth} px window (${r.wide.join('; ')})`);
      check(!r.tables.length, `${label} #/${p}: table pushed out of its card: ${r.tables.join('; ')}`);
      const csp = await page.evaluate(() => window.cspViolations);
      check(!csp.length, `${label} #/${p}: CSP violations: ${csp.slice(0, 3).join(' | ')}`);
      const narrow = await page.evaluate(() => [...document.querySelectorAll('main svg.chart')]
        .map((c) => Math.round(c.getBoundingClientRect().width)).filter((wd) => wd < 250));
      check(!narrow.length, `${label} #/${p}: charts squeezed to ${narrow.join(', ')} px`);
      log(`  #/${p.slice(0, 40)}: ${r.scrollWidth} <= ${r.innerWidth}`);
    }
    if (label === 'phone') {
      begin('phone: the menu is collapsed behind a toggle and closes after choosing a page');
      await page.goto(`${base}/#/dashboard`);
      await page.locator('main h1').waitFor();
      check(await page.locator('[data-testid="nav-pools"]').isHidden(), 'menu links visible without opening the menu');
      await page.click('[data-testid="menu-toggle"]');
      check(await page.getAttribute('[data-testid="menu-toggle"]', 'aria-expanded') === 'true', 'toggle does not say expanded');
      await page.click('[data-testid="nav-pools"]');
      await page.locator('main h1', { hasText: 'Pools' }).waitFor();
      await until(async () => page.locator('[data-testid="nav-pools"]').isHidden(), 'menu to close after navigating', 3000);
    } else {
      check(await page.locator('[data-testid="menu-toggle"]').isHidden(), 'menu toggle shown at 1280 px');
      check(await page.locator('[data-testid="nav-pools"]').isVisible(), 'menu not visible at 1280 px');
    }
    check(b.jsErrors.length === 0, `JavaScript errors: ${b.jsErrors.join(' | ')}`);
    await b.close();
    b = null;
  }
  ok = true;
} catch (e) {
  console.log(`[ui] step "${step}" failed: ${e.message}`);
  if (b) await b.page.screenshot({ path: path.join(opt.shots, 'failure.png'), fullPage: true }).catch(() => {});
} finally {
  if (b) await b.close();
}
console.log(ok ? 'PASS: UI layout' : 'FAIL: UI layout');
process.exit(ok ? 0 : 1);
