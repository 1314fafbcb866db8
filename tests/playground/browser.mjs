// Drives the playground in headless Chromium (tests/playground/test_browser.py).
//
//   node browser.mjs <playwright-core dir> <chromium> <url> <artifact dir>
//
// Waits for the page to load Pyodide and polang, reads the first decision, types a
// policy and waits for the decision and explanation to follow, types a syntax error and
// waits for its problem (editor, line, column), and keeps a screenshot of each state.
// Prints one line `POLANG-RESULT <json>`.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [playwrightDir, executablePath, url, artifacts] = process.argv.slice(2);
const { chromium } = await import(pathToFileURL(path.join(playwrightDir, "index.mjs")).href);
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const out = {};
const requests = [];
const logs = [];
let pageRef = null;
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1200 } });
  page.on("request", (r) => requests.push(r.url()));
  page.on("console", (m) => logs.push(`console.${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => logs.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  pageRef = page;
  const t0 = performance.now();
  await page.goto(url);
  await page.waitForFunction(() => document.getElementById("status").textContent === "ready", null, {
    timeout: 90000,
  });
  out.ready_ms = performance.now() - t0;
  const read = async () => ({
    decision: await page.textContent("#decision"),
    reasons: await page.textContent("#reasons"),
    explanation: await page.textContent("#explanation"),
    repairs: await page.$$eval("#repairs li", (li) => li.map((x) => x.textContent)),
    who_can: await page.$$eval("#who-can li", (li) => li.map((x) => x.textContent)),
    what_can: await page.$$eval("#what-can li", (li) => li.map((x) => x.textContent)),
    problems: await page.$$eval("#problems li", (li) => li.map((x) => x.textContent)),
  });
  out.first = await read();

  // a policy typed at the end of the policies editor, key by key
  await page.focus("#policies");
  await page.keyboard.press("Control+End");
  const t1 = performance.now();
  await page.keyboard.type('\n\n@id("alice-reads")\npermit (principal == Docs::User::"alice", action, resource);');
  await page.waitForFunction(() => document.getElementById("decision").dataset.decision === "allow", null, {
    timeout: 30000,
  });
  out.typed_ms = performance.now() - t1;
  out.after = await read();
  await page.screenshot({ path: path.join(artifacts, "playground.png"), fullPage: true });

  // a misspelt keyword: no decision, the problem with its line and column
  await page.keyboard.type("\npermit (principal, acton, resource);");
  await page.waitForFunction(() => document.querySelectorAll("#problems li").length > 0, null, {
    timeout: 30000,
  });
  out.broken = await read();
  out.bad_editor = await page.$eval("#policies", (t) => t.classList.contains("bad"));
  await page.screenshot({ path: path.join(artifacts, "playground-error.png"), fullPage: true });
} catch (e) {
  // what the page said: its status line and its console (a timeout alone says nothing)
  const status = pageRef ? await pageRef.textContent("#status").catch(() => "?") : "?";
  process.stderr.write(`${e.message}\nstatus: ${status}\n${logs.slice(-30).join("\n")}\n`);
  await browser.close();
  process.exit(1);
} finally {
  await browser.close();
}
out.origins = [...new Set(requests.map((u) => new URL(u).origin))];
process.stdout.write(`POLANG-RESULT ${JSON.stringify(out)}\n`, () => process.exit(0));
