// End-to-end test of the nasd web UI in Debian's chromium (playwright-core drives it).
// Against a running nasd it creates a raidz1 pool, a volume and an iSCSI export through
// the forms, checks client-side and API error messages, runs a self-test from the UI,
// watches the export's live IOPS move on the dashboard and checks the job's result.
//
//   node e2e.mjs --url http://127.0.0.1:8080 --tmp /tmp/dir --shots /tmp/dir/shots
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.NASD_URL || 'http://127.0.0.1:8080' },
    tmp: { type: 'string', default: process.env.E2E_TMP || '' },
    shots: { type: 'string', default: process.env.E2E_SHOTS || '' },
    chromium: { type: 'string', default: process.env.CHROMIUM || '/usr/bin/chromium' },
    pattern: { type: 'string', default: process.env.E2E_PATTERN || '4k-randwrite' },
    seconds: { type: 'string', default: process.env.E2E_SECONDS || '10' },
  },
});
const base = opt.url.replace(/\/$/, '');
const tmp = opt.tmp || fs.mkdtempSync(path.join(os.tmpdir(), 'nasd-e2e-'));
const shots = opt.shots || path.join(tmp, 'screenshots');
fs.mkdirSync(shots, { recursive: true });
const POOL = 'e2epool', VOL = 'vol1', TARGET = 'e2et';

let step = '';
const t0 = Date.now();
const log = (msg) => console.log(`[e2e ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}`);
function begin(name) { step = name; log(name); }
function check(cond, msg) { if (!cond) throw new Error(msg); }

// Wait until fn() (run in the test, may query the page) returns a truthy value.
// With fatal, an exception from fn ends the wait at once (a definite failure).
async function until(fn, what, timeoutMs = 10000, everyMs = 200, fatal = false) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try { last = await fn(); } catch (e) { if (fatal) throw new Error(`${what}: ${e.message}`); last = undefined; }
    if (last) return last;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'nasd-e2e-profile-'));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: opt.chromium,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 800 },
});
const page = ctx.pages()[0] || await ctx.newPage();
page.setDefaultTimeout(15000);
const jsErrors = [];
page.on('pageerror', (e) => jsErrors.push(e.message));
page.on('console', (m) => { if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) jsErrors.push(m.text()); });
page.on('dialog', (d) => d.accept());
const poolPosts = [];
page.on('request', (r) => { if (r.method() === 'POST' && r.url().endsWith('/api/v1/pools')) poolPosts.push(r.postData()); });

const tid = (id) => page.locator(`[data-testid="${id}"]`);
const go = async (hash) => { await page.goto(`${base}/#/${hash}`); await page.locator('main h1').waitFor(); };

async function fillPoolForm(name, layout, files) {
  await page.fill('#pool-name', name);
  await page.selectOption('#pool-layout', layout);
  const rows = page.locator('#pool-members [data-testid="member-row"]');
  while (await rows.count() < files.length) await page.click('#pool-add-member');
  for (let i = 0; i < files.length; i++) {
    const row = rows.nth(i);
    await row.locator('[data-testid="member-path"]').fill(files[i]);
    await row.locator('[data-testid="member-size"]').fill('128M');
    await row.locator('[data-testid="member-create"]').check();
  }
}

let ok = false;
try {
  begin('open the dashboard; every page of the menu renders');
  await go('dashboard');
  await tid('sysinfo').locator('text=/v\\d/').waitFor();
  const titles = { pools: 'Pools', datasets: 'Datasets', volumes: 'Volumes', iscsi: 'iSCSI exports', nfs: 'NFS exports', selftest: 'Self-test', dashboard: 'Dashboard' };
  for (const [nav, title] of Object.entries(titles)) {
    await tid(`nav-${nav}`).click();
    await page.locator('main h1', { hasText: title }).waitFor();
    check(await page.locator(`nav a[aria-current="page"][data-testid="nav-${nav}"]`).count() === 1, `menu does not mark ${nav} current`);
  }

  begin(`create raidz1 pool ${POOL} from 3 new files in ${tmp}`);
  await go('pools');
  const disks = [1, 2, 3].map((i) => path.join(tmp, `disk${i}.img`));
  await fillPoolForm(POOL, 'raidz1', disks);
  await page.click('#pool-create');
  const poolRow = tid(`pool-row-${POOL}`);
  await poolRow.waitFor();
  await until(async () => (await poolRow.locator('[data-testid="state"]').textContent()) === 'ONLINE', 'pool state ONLINE');
  check(disks.every((d) => fs.existsSync(d)), 'member files were not created');
  check(await tid('pool-form-error').isHidden(), 'error box shown after a successful create');

  begin('invalid pool name is refused in the browser with a message, nothing sent');
  const postsBefore = poolPosts.length;
  await fillPoolForm('bad/name', 'raidz1', [4, 5, 6].map((i) => path.join(tmp, `disk${i}.img`)));
  await page.click('#pool-create');
  await tid('pool-form-error').waitFor();
  const clientMsg = await tid('pool-form-error').textContent();
  check(/may contain only/.test(clientMsg), `unexpected client-side message: ${clientMsg}`);
  check(poolPosts.length === postsBefore, 'a request was sent for an invalid name');

  begin('duplicate pool name shows the API error message');
  await page.fill('#pool-name', POOL);
  await page.click('#pool-create');
  await until(async () => poolPosts.length === postsBefore + 1, 'the POST /pools request');
  await until(async () => /exists/.test(await tid('pool-form-error').textContent()), 'API error in the form');
  const apiMsg = (await tid('pool-form-error').textContent()).trim();
  check(apiMsg === `pool "${POOL}" exists`, `form shows "${apiMsg}", expected the API's message`);
  log(`  form error: ${apiMsg}`);

  begin(`create volume ${POOL}/${VOL} (64M, 512 B blocks)`);
  await go('volumes');
  await page.selectOption('#vol-pool', POOL);
  await page.fill('#vol-name', VOL);
  await page.fill('#vol-size', '64M');
  await page.selectOption('#vol-block-size', '512');
  await page.click('#volume-create');
  await tid(`volume-row-${POOL}/${VOL}`).waitFor();

  begin(`create iSCSI export ${TARGET} with ${POOL}/${VOL} as LUN 0`);
  await go('iscsi');
  await page.fill('#iscsi-name', TARGET);
  await tid(`iscsi-lun-${POOL}/${VOL}`).check();
  await page.click('#iscsi-create');
  const tRow = tid(`iscsi-row-${TARGET}`);
  await tRow.waitFor();
  check(/LUN 0: e2epool\/vol1/.test(await tRow.textContent()), 'LUN 0 not listed in the export row');
  await until(async () => (await tRow.locator('[data-testid="status"]').textContent()) === 'active', 'export status active');

  begin('dashboard lists the idle export with zero IOPS');
  await go('dashboard');
  const row = tid(`export-row-iscsi-${TARGET}`);
  await row.waitFor();
  await until(async () => {
    if (await tid('stats-unavailable').isVisible()) throw new Error(await tid('stats-unavailable').textContent());
    return (await row.getAttribute('data-iops')) !== null;
  }, 'live figures for the export (GET /stats)', 10000, 200, true);
  const idle = Number(await row.getAttribute('data-iops'));
  check(idle === 0, `idle export shows ${idle} IOPS before any I/O`);

  begin(`start a ${opt.seconds}s ${opt.pattern} self-test on ${TARGET} from the UI`);
  await go('selftest');
  await page.selectOption('#st-export', `iscsi/${TARGET}`);
  await page.selectOption('#st-pattern', opt.pattern);
  await page.fill('#st-seconds', opt.seconds);
  await page.fill('#st-qd', '16');
  if (opt.pattern === '4k-randwrite') {
    await page.click('#st-start'); // refused in the browser until overwriting is allowed
    await until(async () => /overwrites/.test(await tid('selftest-form-error').textContent()), 'destructive warning');
    await page.check('#st-destructive');
  }
  await page.click('#st-start');
  const jobId = await until(async () => (/^#\/selftest\/(\w+)/.exec(new URL(page.url()).hash) || [])[1], 'job page', 10000);
  await tid('st-status').waitFor();
  log(`  job ${jobId}: ${await tid('st-status').textContent()}`);

  begin('dashboard shows the export\'s IOPS moving during the self-test');
  await go('dashboard');
  await tid(`select-export-iscsi-${TARGET}`).click();
  // read+write IOPS (not just the "other" commands of the test's login) must appear
  const liveIops = await until(async () => {
    const v = Number(await row.getAttribute('data-read-iops')) + Number(await row.getAttribute('data-write-iops'));
    return v > 0 ? v : 0;
  }, 'non-zero read/write IOPS in the export row', 9000, 250);
  const chartMax = await until(async () => {
    const lines = tid('iops-chart').locator('path[data-series="read"], path[data-series="write"]');
    let m = 0;
    for (let i = 0; i < await lines.count(); i++) m = Math.max(m, Number(await lines.nth(i).getAttribute('data-max')));
    return m;
  }, 'non-zero read/write IOPS in the chart', 5000, 250);
  const figures = (await tid('fig-iops').textContent()).replace(/\s+/g, ' ');
  log(`  row IOPS ${liveIops}, chart max ${chartMax}, figures "${figures}"`);
  await page.waitForTimeout(3000); // let the chart gather a few more seconds of the run for the screenshot
  await page.screenshot({ path: path.join(shots, 'dashboard.png'), fullPage: true });

  begin('self-test finishes with integrity ok');
  await go(`selftest/${jobId}`);
  await until(async () => ['done', 'failed'].includes(await tid('st-status').textContent()), 'job to finish',
    (Number(opt.seconds) + 30) * 1000, 500);
  const status = await tid('st-status').textContent();
  const err = (await tid('st-error').count()) ? await tid('st-error').textContent() : '';
  check(status === 'done', `job ended ${status}${err ? `: ${err}` : ''}`);
  const integrity = await tid('st-integrity').textContent();
  check(integrity === 'ok', `integrity is "${integrity}"`);
  const iopsText = await tid('st-result').locator('[data-field="iops"]').textContent();
  check(Number(iopsText.replace(/,/g, '')) > 0, `result IOPS "${iopsText}"`);
  check(await tid('st-progress').getAttribute('aria-valuenow') === '100', 'progress bar not at 100 %');
  const tlPoints = Number(await tid('st-timeline').locator('svg').getAttribute('data-points'));
  check(tlPoints > 0, 'timeline chart has no points');
  log(`  result: ${iopsText} IOPS, integrity ${integrity}, ${tlPoints} timeline points`);
  await page.screenshot({ path: path.join(shots, 'selftest.png'), fullPage: true });

  check(jsErrors.length === 0, `JavaScript errors in the page: ${jsErrors.join(' | ')}`);
  ok = true;
} catch (e) {
  console.log(`[e2e] step "${step}" failed: ${e.message}`);
  if (jsErrors.length) console.log(`[e2e] page errors: ${jsErrors.join(' | ')}`);
  await page.screenshot({ path: path.join(shots, 'failure.png'), fullPage: true }).catch(() => {});
} finally {
  await ctx.close().catch(() => {});
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log(`[e2e] screenshots in ${shots}`);
console.log(ok ? 'PASS: nasd web UI end-to-end' : 'FAIL: nasd web UI end-to-end');
process.exit(ok ? 0 : 1);
