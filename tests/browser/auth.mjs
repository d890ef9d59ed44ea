// The UI against a nasd with API tokens on: it asks for the token once (a prompt),
// keeps it, and shows the data; refusing the prompt shows the API's 401 message.
//   node auth.mjs --url http://127.0.0.1:8080 --token TOKEN --pool NAME
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string' }, token: { type: 'string' }, pool: { type: 'string' },
    chromium: { type: 'string', default: process.env.CHROMIUM || '/usr/bin/chromium' },
  },
});
const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

async function visit(answer) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'nasd-auth-profile-'));
  const ctx = await chromium.launchPersistentContext(profile, { executablePath: opt.chromium, headless: true, args });
  const page = ctx.pages()[0] || await ctx.newPage();
  let prompts = 0;
  page.on('dialog', (d) => { prompts++; answer === null ? d.dismiss() : d.accept(answer); });
  await page.goto(`${opt.url}/#/pools`);
  return { ctx, page, prompts: () => prompts, profile };
}

let failed = false;
const fail = (m) => { console.log(`FAIL: ${m}`); failed = true; };
try {
  const ok = await visit(opt.token);
  await ok.page.getByText(opt.pool, { exact: true }).first().waitFor({ timeout: 15000 })
    .catch(() => fail(`pool ${opt.pool} not shown after entering the token`));
  const stored = await ok.page.evaluate(() => localStorage.getItem('nasd-token'));
  if (stored !== opt.token) fail('token not kept in localStorage');
  if (ok.prompts() !== 1) fail(`asked for the token ${ok.prompts()} times, want 1`);
  await ok.ctx.close();

  const no = await visit(null);
  await no.page.getByText(/API token is required/).first().waitFor({ timeout: 15000 })
    .catch(() => fail('no 401 message shown when the token prompt is refused'));
  await no.ctx.close();
} catch (e) {
  fail(e.message);
}
console.log(failed ? 'auth UI: FAIL' : 'auth UI: PASS');
process.exit(failed ? 1 : 0);
