// The editor's import route, checked in a real browser (Debian's chromium
// through playwright-core, as screenshot.mjs): Workflows → Import from file,
// then save, then read the saved workflow back through n8n's REST API.
// Called by drills.mjs when E2E_SCREENSHOT_DIR is set (e2e.sh --screenshots).
//
// Two files are imported into new workflows:
//   known    the committed webhook-gate.json, whose credential id exists
//            (imported with the CLI, docs/n8n.md step 3);
//   unknown  the same file with a credential id and name this n8n does not
//            know, as when the credential was created by hand in the editor
//            (n8n gives it an id of its own, and names it "Postgres account").
//            Then each Postgres node is opened, its credential checked and,
//            when it is not the gate's (n8n picks the newest Postgres
//            credential, the inbox's once the inbox is set up), the gate's
//            picked from the list; then it is closed.  That is what
//            docs/n8n.md tells a user to do.
// It returns what the saved workflows' Postgres nodes refer to.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { signIn } from './screenshot.mjs';

export async function checkEditorImport({ base, email, password, gateFile, credentialId, credentialName, workDir, rest }) {
  const require = createRequire(import.meta.url);
  const { chromium } = require(process.env.PLAYWRIGHT_CORE_DIR);
  const profile = mkdtempSync(join(tmpdir(), 'idem-gate-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1600, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const out = {};
  try {
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    // a loaded machine serves the editor slowly
    page.setDefaultNavigationTimeout(120000);
    page.setDefaultTimeout(90000);
    await page.route('**/*', (route) => {
      const u = new URL(route.request().url());
      return ['127.0.0.1', 'localhost'].includes(u.hostname) || u.protocol === 'data:' ? route.continue() : route.abort();
    });
    await signIn(page, { base, email, password });

    const gate = JSON.parse(gateFile);
    const variants = {
      known: gate,
      // a credential made by hand: an id of its own, and n8n's default name
      unknown: JSON.parse(
        JSON.stringify(gate)
          .split(`"id":"${credentialId}"`).join('"id":"idemGateHandMade"')
          .split('"name":"idem_gate Postgres"').join('"name":"Postgres account"'),
      ),
    };
    for (const [label, wf] of Object.entries(variants)) {
      const file = join(workDir, `editor-import-${label}.json`);
      // a workflow of its own: another name, so it is told apart from the CLI's
      writeFileSync(file, JSON.stringify({ ...wf, name: `${wf.name} (editor import, ${label})` }));
      await page.goto(`${base}/workflow/new`, { waitUntil: 'domcontentloaded' });
      await page.locator('[data-test-id="workflow-import-input"]').waitFor({ state: 'attached', timeout: 90000 });
      await page.waitForTimeout(1500);
      await page.setInputFiles('[data-test-id="workflow-import-input"]', file);
      await page.locator('.vue-flow__node').first().waitFor({ timeout: 60000 });
      await page.waitForTimeout(1500);
      const issuesAfterImport = await page.locator('[data-test-id="node-issues"]').count();
      if (label === 'unknown') {
        // what the docs tell a user: open each Postgres node, check that its
        // credential is the gate's, pick the gate's if it is not, close it
        const exact = new RegExp(`^\\s*${credentialName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*$`);
        out.picked = [];
        for (const name of ['Claim', 'Complete', 'Fail claim']) {
          await page.locator(`[data-node-name="${name}"]`).first().dblclick();
          const select = page.locator('[data-test-id="node-credentials-select"]').first();
          await select.waitFor({ timeout: 20000 });
          await page.waitForTimeout(1000);
          const shown = await select.locator('input').first().inputValue().catch(() => '');
          if (!exact.test(shown)) {
            await select.click();
            await page.waitForTimeout(1000);
            // an item shows the credential's name (and, from 2.40 on, its
            // type beside it): pick the one whose name is the gate's
            const items = page.locator('.el-select-dropdown__item:visible');
            const byName = items.filter({ has: page.locator('[class*="optionName"]', { hasText: exact }) });
            await ((await byName.count()) > 0 ? byName : items.filter({ hasText: exact })).first().click({ timeout: 15000 });
            await page.waitForTimeout(800);
            out.picked.push(`${name}: ${shown || '(none)'} -> ${credentialName}`);
          }
          if (process.env.E2E_EDITOR_DEBUG) {
            await page.screenshot({ path: `/tmp/editor-debug-${name}.png` });
            const dump = await page.evaluate(() => [...document.querySelectorAll('[data-test-id]')]
              .filter((e) => e.offsetParent !== null).map((e) => e.getAttribute('data-test-id')).join(' '));
            writeFileSync(`/tmp/editor-debug-${name}.txt`, dump);
          }
          // close the node's panel (a first Escape may only close the list)
          for (let i = 0; i < 4 && (await page.locator('[data-test-id="ndv"]:visible').count()) > 0; i++) {
            const back = page.locator('[data-test-id="ndv-close-button"]:visible, [data-test-id="back-to-canvas"]:visible');
            if (i > 0 && (await back.count()) > 0) await back.first().click();
            else await page.keyboard.press('Escape');
            await page.waitForTimeout(500);
          }
        }
      }
      const issuesBeforeSave = await page.locator('[data-test-id="node-issues"]').count();
      await page.keyboard.press('Control+s');
      await page.waitForURL((u) => /\/workflow\/[^/]+$/.test(u.pathname) && !u.pathname.endsWith('/new'), { timeout: 30000 });
      await page.waitForTimeout(1500);
      const id = new URL(page.url()).pathname.split('/').pop();
      await page.screenshot({ path: join(workDir, `editor-import-${label}.png`) });
      const saved = (await rest('GET', `/workflows/${id}`)).json;
      const nodes = (saved?.data ?? saved)?.nodes ?? [];
      out[label] = {
        id,
        errorWorkflow: (saved?.data ?? saved)?.settings?.errorWorkflow ?? null,
        issuesAfterImport,
        issuesBeforeSave,
        credentials: Object.fromEntries(
          nodes.filter((n) => n.type === 'n8n-nodes-base.postgres').map((n) => [n.name, n.credentials?.postgres?.id ?? null]),
        ),
      };
    }
  } finally {
    await ctx.close();
    rmSync(profile, { recursive: true, force: true });
  }
  return out;
}
