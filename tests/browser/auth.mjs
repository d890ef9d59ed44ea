// The UI against a nasd with API tokens on. No token: the token form (not a browser prompt)
// is shown exactly once however many requests got 401, the token is kept and the data shown.
// "Forget token" removes it and the form comes back; cancelling it shows the API's 401
// message. A wrong stored token: the form says the token was refused (not "unreachable").
//   node auth.mjs --url http://127.0.0.1:8080 --token TOKEN --pool NAME
import { parseArgs } from 'node:util';
import { begin, check, log, until, launch, step } from './lib.mjs';

const { values: opt } = parseArgs({ options: { url: { type: 'string' }, token: { type: 'string' }, pool: { type: 'string' } } });
let ok = false;
const b = await launch();
const { page } = b;
let prompts = 0;
page.on('dialog', (d) => { prompts++; d.dismiss(); });
const tid = (id) => page.locator(`[data-testid="${id}"]`);
const form = tid('token-form');
const shown = async () => Number(await form.getAttribute('data-shown'));
try {
  begin('no token: the token form appears once; entering the token shows the pools');
  await page.goto(`${opt.url}/#/pools`);
  await form.waitFor({ state: 'visible' });
  check(await form.getAttribute('data-reason') === 'missing', 'form does not say a token is needed');
  await page.waitForTimeout(700); // more requests (system info, lists) get their 401 meanwhile
  check(await shown() === 1, `token form shown ${await shown()} times before answering, want 1`);
  await page.fill('#token-input', opt.token);
  await page.click('#token-submit');
  await page.getByText(opt.pool, { exact: true }).first().waitFor({ timeout: 15000 });
  check(await page.evaluate(() => localStorage.getItem('nasd-token')) === opt.token, 'token not kept in localStorage');
  for (const p of ['dashboard', 'volumes', 'pools']) { await page.goto(`${opt.url}/#/${p}`); await page.locator('main h1').waitFor(); }
  await page.waitForTimeout(500);
  check(await form.isHidden(), 'token form shown again with a good token');
  check(await shown() === 1, `token form shown ${await shown()} times, want 1`);
  check(prompts === 0, `${prompts} browser dialogs (window.prompt) used`);
  check(await tid('unreachable-banner').isHidden(), 'unreachable banner shown on a 401');

  begin('"Forget token" removes it; the form comes back; cancelling shows the 401 message');
  await tid('logout').click();
  await form.waitFor({ state: 'visible' });
  check(await page.evaluate(() => localStorage.getItem('nasd-token')) === null, 'token still stored after "Forget token"');
  await page.click('#token-cancel');
  await page.getByText(/API token is required/).first().waitFor({ timeout: 15000 });
  await page.waitForTimeout(500);
  check(await form.isHidden(), 'token form came back by itself after cancel');
  check(await tid('unreachable-banner').isHidden(), 'unreachable banner shown for a missing token');
  check(await tid('logout').isHidden(), '"Forget token" shown without a token');

  begin('a wrong stored token: the form says it was refused; the right one works');
  await page.evaluate(() => localStorage.setItem('nasd-token', 'not-a-valid-token'));
  await page.goto(`${opt.url}/#/pools`);
  await page.reload();
  await form.waitFor({ state: 'visible' });
  check(await form.getAttribute('data-reason') === 'wrong', 'form does not say the token was refused');
  check(/refused/.test(await tid('token-msg').textContent()), `form message "${await tid('token-msg').textContent()}"`);
  check(await tid('unreachable-banner').isHidden(), 'unreachable banner shown for a wrong token');
  await page.waitForTimeout(500);
  check(await shown() === 1, `token form shown ${await shown()} times for one wrong token, want 1`);
  await page.fill('#token-input', opt.token);
  await page.press('#token-input', 'Enter');
  await page.getByText(opt.pool, { exact: true }).first().waitFor({ timeout: 15000 });
  check(b.jsErrors.length === 0, `JavaScript errors: ${b.jsErrors.join(' | ')}`);
  log('  token form once per need, wrong token told apart, forget token works');
  ok = true;
} catch (e) {
  console.log(`[ui] step "${step}" failed: ${e.message}`);
} finally {
  await b.close();
}
console.log(ok ? 'auth UI: PASS' : 'auth UI: FAIL');
process.exit(ok ? 0 : 1);
