// Screenshots of the example workflows as the n8n editor shows them, for
// docs/img/.  Called by drills.mjs when E2E_SCREENSHOT_DIR is set (e2e.sh
// --screenshots), after the workflows are imported and the owner exists.
// Uses Debian's chromium (apt-get install chromium) through playwright-core,
// resolved from PLAYWRIGHT_CORE_DIR; nothing is downloaded by the browser.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

// Sign in as the owner.  n8n 2.8.4 sometimes still reports "no owner" for a
// while after the owner was set up through its REST API (the editor then
// shows the owner set-up form): wait for its settings to say otherwise, and
// fill the set-up form with the same owner if it never does.
export async function signIn(page, { base, email, password, firstName = 'Drill', lastName = 'Runner' }) {
  const needsSetup = async () =>
    page.evaluate(async () => (await (await fetch('/rest/settings')).json())?.data?.userManagement?.showSetupOnFirstLoad === true);
  await page.goto(`${base}/signin`, { waitUntil: 'domcontentloaded' });
  for (let i = 0; i < 60 && (await needsSetup()); i++) await page.waitForTimeout(1000);
  await page.goto(`${base}/signin`, { waitUntil: 'domcontentloaded' });
  await page.waitForURL((u) => u.pathname.startsWith('/signin') || u.pathname.startsWith('/setup'), { timeout: 30000 });
  await page.waitForTimeout(1000);
  if (new URL(page.url()).pathname.startsWith('/setup')) {
    await page.locator('input[name="email"]').fill(email);
    await page.locator('input[name="firstName"]').fill(firstName);
    await page.locator('input[name="lastName"]').fill(lastName);
    await page.locator('input[name="password"]').fill(password);
  } else {
    await page.locator('input[type="email"], input[name="emailOrLdapLoginId"], input[name="email"]').first().fill(email);
    await page.locator('input[type="password"]').first().fill(password);
  }
  await page.locator('button[type="submit"], [data-test-id="form-submit-button"]').first().click();
  await page.waitForURL((u) => !u.pathname.startsWith('/signin') && !u.pathname.startsWith('/setup'), { timeout: 60000 });
}

export async function screenshots({ base, email, password, outDir, workflows }) {
  const require = createRequire(import.meta.url);
  const { chromium } = require(process.env.PLAYWRIGHT_CORE_DIR);
  const profile = mkdtempSync(join(tmpdir(), 'idem-gate-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1800, height: 1000 },
    deviceScaleFactor: 1,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const written = [];
  try {
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    // a loaded machine serves the editor slowly
    page.setDefaultNavigationTimeout(120000);
    page.setDefaultTimeout(90000);
    // everything but the local n8n is refused: the page stays on loopback
    await page.route('**/*', (route) => {
      const u = new URL(route.request().url());
      return ['127.0.0.1', 'localhost'].includes(u.hostname) || u.protocol === 'data:' ? route.continue() : route.abort();
    });
    await signIn(page, { base, email, password });
    for (const { id, file } of workflows) {
      await page.goto(`${base}/workflow/${id}`, { waitUntil: 'domcontentloaded' });
      try {
        // a loaded machine can take long to build the editor: one reload, then give up
        await page
          .locator('.vue-flow__node')
          .first()
          .waitFor({ timeout: 60000 })
          .catch(async () => {
            await page.reload({ waitUntil: 'domcontentloaded' });
            await page.locator('.vue-flow__node').first().waitFor({ timeout: 90000 });
          });
      } catch (e) {
        const debug = join(process.env.E2E_WORK ?? tmpdir(), `screenshot-failed-${id}.png`);
        await page.screenshot({ path: debug }).catch(() => {});
        throw new Error(`the editor showed no workflow canvas for ${id} (page saved as ${debug}): ${e.message}`);
      }
      await page.waitForTimeout(1500);
      // close pop-ups and toasts, then fit the whole workflow in view
      await page.keyboard.press('Escape');
      for (const sel of ['.el-notification__closeBtn', '[data-test-id="close-button"]']) {
        for (const b of await page.locator(sel).all()) await b.click({ timeout: 1000 }).catch(() => {});
      }
      await page.locator('.vue-flow__pane').first().click({ position: { x: 5, y: 5 } }).catch(() => {});
      await page.keyboard.press('1'); // zoom to fit
      await page.waitForTimeout(1200);
      const path = join(outDir, file);
      await page.screenshot({ path });
      written.push(path);
    }
  } finally {
    await ctx.close();
    rmSync(profile, { recursive: true, force: true });
  }
  return written;
}
