// The dashboard's scenarios in headless Chromium, run by crates/cli/tests/suite/browser.rs:
//
//   node dashboard.mjs SCENARIO URL SCREENSHOT.png
//
// with PLAYWRIGHT_CORE set to the playwright-core directory .ci/browser/install.sh
// filled. Each scenario drives the page as a person would (no reload), prints what it
// measured as `key: value` lines and exits 1 with the reason when the page is wrong.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const [scenario, url, shot] = process.argv.slice(2);
const TOKEN = process.env.BATON_TEST_TOKEN;

const say = (k, v) => console.log(`${k}: ${v}`);
function check(ok, what) {
  if (!ok) throw new Error(what);
}

/// Calls `f` until it returns something truthy (every 25 ms, up to `ms`).
async function until(what, f, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const turnRows = (page) => page.locator("#turns tr.turn").count();

async function startUnit(page, description) {
  await page.fill("#unit-desc", description);
  await page.click("#new-unit button[type=submit]");
  await page.waitForURL(/#\/runs\/[0-9a-f]+$/);
  return page.url().split("/").pop();
}

/// The page's own marker: gone if the page were reloaded.
const mark = (page) => page.evaluate(() => { window.__baton_test = 1; });
const marked = (page) => page.evaluate(() => window.__baton_test === 1);

const scenarios = {
  // Turns of a unit appear as they commit, pushed over SSE, without a reload.
  async live(page) {
    await page.goto(url);
    await page.waitForSelector("#conn.live");
    await mark(page);
    // Every count of turn rows the page ever shows, recorded in the page as it draws.
    await page.evaluate(() => {
      window.__counts = [];
      new MutationObserver(() => {
        const c = document.querySelectorAll("#turns tr.turn").length;
        if (c && c !== window.__counts[window.__counts.length - 1]) window.__counts.push(c);
      }).observe(document.getElementById("main"), { childList: true, subtree: true });
      // How long each committed turn took to reach this page: its arrival here minus
      // the engine's clock when it was committed (reported, not asserted).
      window.__lags = [];
      new EventSource("/api/events").onmessage = (m) => {
        const ev = JSON.parse(m.data);
        if (ev.type === "turn_committed") window.__lags.push(Date.now() - ev.at);
      };
    });
    // Markup in what a person typed stays text wherever it is shown (the objective,
    // the steps the plan names, the briefings).
    const unit = await startUnit(page, 'Add rate limiting to the public API <img src=x onerror="window.__xss=1"><script>window.__xss=2</script>');
    await until("the unit to finish", async () => (await page.locator("#main .panel .pill.finished").count()) > 0, 30000);
    const last = await turnRows(page);
    const seen = await page.evaluate(() => window.__counts);
    // Rows arrived while the unit ran: the page showed it part-way at least twice.
    check(seen.filter((c) => c < last).length >= 2, "turn rows drawn as they came: " + seen.join(" → "));
    check(await marked(page), "the page was reloaded");
    check((await page.locator("#main h1").innerText()).includes('<img src=x onerror="window.__xss=1">'), "the objective is shown as typed");
    check((await page.locator("img, #main script, #side script").count()) === 0, "no element was made of the objective's markup");
    check((await page.evaluate(() => window.__xss)) === undefined, "no script of the objective ran");
    const row = await page.locator("#turns tr.turn").last().innerText();
    check(/\/ 2,000/.test(row), "a turn row shows its briefing against the budget: " + row);
    check((await page.locator("#unit .stations span").count()) >= 5, "the unit's stations are shown");
    say("unit", unit);
    say("turn rows seen", seen.join(" → "));
    const lags = (await page.evaluate(() => window.__lags)).sort((a, b) => a - b);
    if (lags.length) say("commit to browser (ms): n=" + lags.length, "p50 " + lags[Math.floor(lags.length / 2)] + ", max " + lags[lags.length - 1]);
  },

  // The budget slider recompiles the briefing: tokens and dropped items change.
  async briefing(page) {
    await page.goto(url);
    const run = await page.evaluate(async () => (await (await fetch("/api/runs")).json()).runs[0].id);
    await page.goto(url + "#/runs/" + run + "/briefing/2");
    await page.waitForSelector("#recompiled .tokens");
    const read = async () => ({
      tokens: await page.locator("#recompiled .tokens").innerText(),
      of: await page.locator("#recompiled .tokens + span").textContent(),
      dropped: await page.locator("#recompiled tr.drop").count(),
      omitted: await page.locator("#recompiled .chip.out").count(),
    });
    const at = async (budget) => {
      const before = await read();
      // Timed in the page: from the slider's input event to the recompiled briefing
      // drawn (the 60 ms debounce included).
      await page.$eval("#budget", (el, v) => {
        const out = document.getElementById("recompiled");
        const t0 = performance.now();
        window.__drawn = null;
        new MutationObserver((_, obs) => { window.__drawn = performance.now() - t0; obs.disconnect(); })
          .observe(out, { childList: true });
        el.value = String(v);
        el.dispatchEvent(new Event("input"));
      }, budget);
      await until(`the briefing at ${budget}`, async () => (await read()).of.startsWith(` / ${budget.toLocaleString("en")} tokens`));
      check((await read()).tokens !== before.tokens, "the tokens changed");
      const after = await read();
      const ms = await page.evaluate(() => window.__drawn);
      say(`budget ${budget}`, `${after.tokens} tokens, ${after.dropped} dropped rows, ${after.omitted} sections omitted, drawn ${Math.round(ms)} ms after the slider moved`);
      check(ms < 1000, "the briefing follows the slider within a second");
      return after;
    };
    const small = await at(200);
    const large = await at(3000);
    check(Number(small.tokens.replace(/,/g, "")) <= 200, "the small briefing fits 200 tokens: " + small.tokens);
    check(Number(large.tokens.replace(/,/g, "")) > Number(small.tokens.replace(/,/g, "")), "more budget, more briefing");
    check(small.dropped > large.dropped, "fewer items dropped with more budget");
    check(small.omitted > large.omitted, "fewer sections omitted with more budget");
    // Another worker, the same budget: compiled for that worker.
    const other = await page.$eval("#worker", (el) => [...el.options].map((o) => o.value).find((v) => v !== el.value));
    await page.selectOption("#worker", other);
    await until("the briefing for " + other, async () => (await page.locator("#recompiled details pre").textContent()).includes("for " + other));
    say("worker", other);
    await page.$eval("#budget", (el) => { el.value = "600"; el.dispatchEvent(new Event("input")); });
    await until("the briefing at 600", async () => (await read()).of.startsWith(" / 600 tokens"));
    check((await page.locator(".then .tokens").count()) === 1, "the turn's own briefing is shown beside");
  },

  // Benching a pool from the floor: the next unit's seats come from the other pools.
  async bench(page) {
    await page.goto(url + "#/floor");
    await page.waitForSelector("#timeline .pin");
    const before = await page.locator('#timeline .pin[data-pool="alpha-1"]').count();
    check(before > 0, "the first unit seated workers of pool alpha-1");
    await page.click('button.bench[data-pool="alpha-1"]');
    await page.waitForSelector('.pool[data-pool="alpha-1"] .pill.benched');
    check((await page.locator('button.bench[data-pool="alpha-1"]').innerText()) === "Unbench", "the button lifts the bench now");
    const unit = await startUnit(page, "Add rate limiting to the public API");
    await until("the second unit to finish", async () => (await page.locator("#main .panel .pill.finished").count()) > 0, 20000);
    await page.goto(url + "#/floor");
    await page.waitForSelector("#timeline .pin");
    const row = page.locator(`#timeline a[href="#/runs/${unit}"] + .squares .pin`);
    const pools = await row.evaluateAll((els) => els.map((e) => e.dataset.pool));
    const count = (p) => pools.filter((x) => x === p).length;
    say("pins before the bench, pool alpha-1", before);
    say("pins of the next unit", JSON.stringify({ "alpha-1": count("alpha-1"), "alpha-2": count("alpha-2"), beta: count("beta"), gamma: count("gamma") }));
    check(pools.length > 0, "the next unit's pins are on the timeline");
    check(count("alpha-1") === 0, "no seat of the next unit from the benched pool");
    check(count("alpha-2") > 0, "its alpha seats came from alpha-2");
  },

  // A vague unit stops on a question; it is answered from the page and goes on.
  async question(page) {
    await page.goto(url);
    await page.waitForSelector("#conn.live");
    await mark(page);
    await startUnit(page, "Fix it");
    // Located afresh each time: the page redraws as events arrive.
    const q = page.locator("#question");
    await q.waitFor();
    const text = await q.innerText();
    check(text.includes('What should "Fix it" change'), "the question is shown: " + text);
    const top = await q.evaluate((el) => el.getBoundingClientRect().top);
    check(top < 400, "the question is near the top of the page: " + top);
    // The header redraws on the run_blocked event, a moment after the question panel.
    await until("the unit to show as blocked", async () => (await page.locator("#main .pill.blocked").count()) > 0, 10000);
    const blockedAt = await turnRows(page);
    await page.fill("#answer", "Return 429 after 100 requests a minute per key");
    await page.click("#answer-send");
    await until("the unit to go on", async () => (await turnRows(page)) > blockedAt + 2, 20000);
    await until("the unit to finish", async () => (await page.locator("#main .panel .pill.finished").count()) > 0, 20000);
    check((await page.locator("#question").count()) === 0, "the question is gone");
    check(await marked(page), "the page was reloaded");
    say("turns when it stopped", blockedAt);
    say("turns at the end", await turnRows(page));
  },

  // Jobs: the columns, then a judged job's commits, gate log, diff and judgement.
  async jobs(page) {
    await page.goto(url + "#/jobs");
    await page.waitForSelector("#jobs .card");
    const columns = await page.locator("#jobs .col h2").allInnerTexts();
    say("columns", columns.join(", "));
    check(columns.some((c) => /judged \(2\)/i.test(c)), "both candidates are in the judged column");
    await page.locator("#jobs .card").first().click();
    await page.waitForSelector("#diff");
    check((await page.locator("#commits tr").count()) === 2, "a commit per task");
    check((await page.locator("#diff .add").count()) >= 2, "the patch's added lines, coloured");
    await page.locator(".gate summary").click();
    const gate = await page.locator(".gate").innerText();
    check(gate.includes("passed") && gate.includes("a.txt"), "the gate and its log: " + gate);
    const judged = await page.locator(".judgement").innerText();
    check(/Winner [AB]/.test(judged), "the verdict: " + judged);
    const mapped = await page.locator('.judgement tbody tr a[href^="#/jobs/j"]').count();
    check(mapped === 2, "each label's job named: " + judged);
    check((await page.locator(".judgement tr.winner").count()) === 1, "the winner's row stands out");
    say("judgement", judged.split("\n").find((l) => l.startsWith("Winner")));
  },

  // With a token: the page says it needs one; opened with it, it works.
  async token(page) {
    await page.goto(url);
    const banner = page.locator("#token-needed");
    await banner.waitFor();
    const said = await banner.innerText();
    check(said.includes("needs its token") && said.includes("/?token="), "the page says how to give the token: " + said);
    say("without the token", said.split("\n")[0]);
    await page.screenshot({ path: shot.replace(/\.png$/, "_needed.png") });
    await page.goto(url + "?token=" + encodeURIComponent(TOKEN));
    await page.waitForSelector("#conn.live");
    await page.waitForSelector("#runs li a");
    check((await page.locator("#token-needed").count()) === 0, "no banner with the token");
    check(!page.url().includes("token="), "the token is taken out of the address bar");
    // The cookie carries it from now on: a plain reload works too.
    await page.goto(url + "#/floor");
    await page.waitForSelector("#pools");
    say("with the token", "runs listed, stream live, address " + page.url());
  },
};

const browser = await chromium.launch({ executablePath: process.env.BATON_CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
let failed = null;
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
page.setDefaultTimeout(15000);
const problems = [];
page.on("pageerror", (e) => problems.push(String(e)));
page.on("console", (m) => { if (m.type() === "error" && !/401/.test(m.text())) problems.push(m.text()); });
const t0 = Date.now();
try {
  await scenarios[scenario](page);
  check(problems.length === 0, "the page reported errors:\n" + problems.join("\n"));
} catch (e) {
  failed = e;
}
try {
  await page.screenshot({ path: shot, fullPage: true });
} catch (_) { /* the failure says more */ }
await browser.close();
say("took", Date.now() - t0 + " ms");
if (failed) {
  console.log("FAILED: " + (failed.stack || failed));
  process.exit(1);
}
console.log("ok");
