// The chat page at / of `hearth serve` in a real browser: Debian's Chromium, headless, driven
// by playwright-core. tests/e2e/test_webui.c starts two servers on stories260K and runs
// `node --test` with, in the environment:
//   HEARTH_WEBUI_URL        http://127.0.0.1:PORT of a server with --api-key
//   HEARTH_WEBUI_KEY        that key
//   HEARTH_WEBUI_GATED_URL  a server started with the scheduler gate (sched.h): an engine step
//                           runs only for a byte written to
//   HEARTH_WEBUI_GATE       that FIFO, so a reply is mid-stream by construction, not by speed
//   HEARTH_WEBUI_SCREENSHOT where the screenshot of a chat goes (default: a file in the
//                           temporary directory, hearth-webui.png)
//   HEARTH_CHROMIUM         the browser (default /usr/bin/chromium)
// Every wait is for a condition on the page or the server; the timeouts only guard a hang.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.HEARTH_WEBUI_URL;
const key = process.env.HEARTH_WEBUI_KEY;
const gatedBase = process.env.HEARTH_WEBUI_GATED_URL;
const gatePath = process.env.HEARTH_WEBUI_GATE;
const shot = process.env.HEARTH_WEBUI_SCREENSHOT || path.join(os.tmpdir(), 'hearth-webui.png');
if (!base || !key || !gatedBase || !gatePath) {
  throw new Error('HEARTH_WEBUI_URL, _KEY, _GATED_URL and _GATE must be set ' +
                  '(run from tests/e2e/test_webui.c)');
}
const GUARD_MS = 120_000;

let browser;
let context;
let page;
const pageErrors = [];

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.HEARTH_CHROMIUM || '/usr/bin/chromium',
    headless: true,
  });
  context = await browser.newContext({ viewport: { width: 1100, height: 720 } });
  context.setDefaultTimeout(GUARD_MS);
  context.on('weberror', (e) => pageErrors.push(e.error()));
  context.on('dialog', (d) => d.accept()); // the confirmation before a delete
  page = await context.newPage();
});

after(async () => {
  await browser?.close();
});

// ------------------------------------------------------------------ helpers ---

const norm = (s) => s.replace(/\s+/g, ' ').trim();
const lastReply = (p) => p.locator('#log .msg.assistant').last();
// the reply's text as the reader sees it (line breaks included, which textContent drops)
const lastContent = (p) => lastReply(p).locator('.content').innerText();
const stored = (p) => p.evaluate(() => JSON.parse(localStorage.getItem('hearth.conversations')));

async function setting(p, id, value) {
  if (!(await p.locator('#settings').evaluate((d) => d.open))) await p.click('#settings summary');
  await p.fill('#' + id, String(value));
}

async function send(p, text) {
  await p.fill('#input', text);
  await p.click('#send');
}

const idle = (p) => p.waitForFunction(() => document.getElementById('send').textContent === 'Send');

async function modelShown(p) {
  await p.waitForFunction(() => document.getElementById('model-name').textContent === 'stories');
}

function noPageErrors() {
  assert.deepEqual(pageErrors.map(String), [], 'the page threw');
}

// ------------------------------------------------------------------- tests ---

let firstReply = ''; // what stories260K said to the first message, for the reload test

test('asks for the API key (again when it is wrong), then chats: a streamed reply, ' +
     'the same text the API gives', async () => {
  const requests = [];
  page.on('request', (r) => {
    if (r.url().endsWith('/v1/chat/completions')) requests.push(r);
  });
  await page.goto(base + '/');
  await page.locator('#key-dialog').waitFor({ state: 'visible' });
  await page.fill('#key-input', 'not-the-key');
  await page.click('#key-save');
  // the page tries it on /v1/models, gets a 401 and asks again, saying why
  await page.waitForFunction(() => document.getElementById('key-dialog').open &&
                             /refused/.test(document.getElementById('key-why').textContent));
  await page.fill('#key-input', key);
  await page.click('#key-save');
  await modelShown(page);
  assert.equal(await page.locator('#key-dialog').isVisible(), false);

  await setting(page, 'temperature', 0);
  await setting(page, 'max_tokens', 24);
  await send(page, 'Once upon a time');
  await idle(page);

  assert.equal(requests.length, 1);
  const sent = requests[0].postDataJSON();
  assert.equal(sent.stream, true);
  assert.equal(sent.model, 'stories');
  assert.equal(sent.temperature, 0);
  assert.equal(sent.max_tokens, 24);
  assert.deepEqual(sent.messages, [{ role: 'user', content: 'Once upon a time' }]);
  assert.equal((await requests[0].allHeaders()).authorization, 'Bearer ' + key);
  const res = await requests[0].response();
  assert.equal(res.status(), 200);
  assert.match(res.headers()['content-type'], /^text\/event-stream/);

  // the same request, not streamed, from outside the browser: greedy, so the same text
  delete sent.stream_options;
  const plain = await fetch(base + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + key },
    body: JSON.stringify({ ...sent, stream: false }),
  });
  assert.equal(plain.status, 200);
  const want = await plain.json();
  firstReply = want.choices[0].message.content;
  assert.ok(firstReply.length > 0);

  const conv = (await stored(page))[0];
  assert.equal(conv.title, 'Once upon a time');
  assert.equal(conv.messages.length, 2);
  assert.equal(conv.messages[1].content, firstReply);
  assert.equal(conv.messages[1].usage.completion_tokens, want.usage.completion_tokens);
  assert.equal(norm(await lastContent(page)), norm(firstReply));
  assert.match(await lastReply(page).locator('.note').innerText(),
               new RegExp(`${want.usage.completion_tokens} tokens`));
  assert.equal(await lastReply(page).locator('.error').count(), 0);
  await page.screenshot({ path: shot });
  console.log(`# screenshot: ${shot}`);
  noPageErrors();
});

test('the conversation, the settings and the key survive a reload (localStorage)', async () => {
  await page.reload();
  await modelShown(page); // with the key kept: no dialog
  assert.equal(await page.locator('#key-dialog').isVisible(), false);
  assert.equal(await page.locator('#convs li').count(), 1);
  assert.equal(await page.locator('#convs li .open').innerText(), 'Once upon a time');
  assert.equal(await page.locator('#log .msg.user').innerText(), 'Once upon a time');
  assert.equal(norm(await lastContent(page)), norm(firstReply));
  assert.equal(await page.inputValue('#max_tokens'), '24');
  assert.equal(await page.inputValue('#temperature'), '0');
  noPageErrors();
});

test('conversations: a new one, switching between them, deleting one', async () => {
  await page.click('#new');
  assert.equal(await page.locator('#log .msg').count(), 0);
  await send(page, 'The cat');
  await idle(page);
  assert.equal(await page.locator('#convs li').count(), 2);
  assert.equal(await page.locator('#convs li.current .open').innerText(), 'The cat');
  assert.ok((await lastContent(page)).length > 0);

  await page.locator('#convs li .open', { hasText: 'Once upon a time' }).click();
  assert.equal(await page.locator('#log .msg.user').innerText(), 'Once upon a time');
  assert.equal(norm(await lastContent(page)), norm(firstReply));

  await page.locator('#convs li', { hasText: 'The cat' }).locator('.delete').click();
  assert.equal(await page.locator('#convs li').count(), 1);
  assert.deepEqual((await stored(page)).map((c) => c.title), ['Once upon a time']);
  assert.equal(await page.locator('#log .msg.user').innerText(), 'Once upon a time');
  noPageErrors();
});

test('a request the server refuses: its error shows in the conversation', async () => {
  await page.click('#new');
  await setting(page, 'temperature', 3); // past OpenAI's 2: a 400 naming the field
  await send(page, 'Hello');
  await idle(page);
  const error = await lastReply(page).locator('.error').innerText();
  assert.match(error, /^400: .*'temperature'/);
  await setting(page, 'temperature', 0);
  noPageErrors();
});

test('reasoning folded, tool calls, Markdown, an error mid-stream; ' +
     'model output never becomes markup', async () => {
  // a stream as hearth sends one for a reasoning model with tools, here made up (stories260K
  // has neither), in CRLF lines as SSE allows
  const content = [
    '## Weather *report*\n\n',
    'Some **bold**, _italic_ and `inline <b>code</b>` text, a ',
    '[safe link](https://example.com/a_b_c) and a [bad one](javascript:window.__xss=1).\n\n',
    '- one\n- two <img src=x onerror="window.__xss=2">\n\n1. first\n2. second\n\n',
    '```python\ndef f(x):\n    return x < 1 and "<script>window.__xss=3</script>"\n```\n\n',
    '<script>window.__xss=4</script> <b>not bold</b>',
  ];
  const events = [
    { choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] },
    { choices: [{ index: 0, delta: { reasoning_content: 'The user wants ' } }] },
    { choices: [{ index: 0, delta: { reasoning_content: 'the weather.' } }] },
    ...content.map((c) => ({ choices: [{ index: 0, delta: { content: c } }] })),
    { choices: [{ index: 0, delta: { tool_calls: [{
      index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' },
    }] } }] },
    { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] } }] },
    { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] } }] },
    { error: { message: 'generation failed: out of memory', type: 'server_error', param: null, code: null } },
  ];
  const body = events.map((e) => 'data: ' + JSON.stringify(e) + '\r\n\r\n').join('') + 'data: [DONE]\r\n\r\n';
  await page.route('**/v1/chat/completions', (route) => route.fulfill({
    status: 200, headers: { 'Content-Type': 'text/event-stream' }, body,
  }), { times: 1 });
  await page.click('#new');
  await send(page, 'Weather in Paris?');
  await idle(page);

  const reply = lastReply(page);
  const reasoning = reply.locator('details.reasoning');
  assert.equal(await reasoning.evaluate((d) => d.open), false);
  assert.equal(await reasoning.locator('summary').innerText(), 'Reasoning');
  assert.equal(await reasoning.locator('.md').evaluate((e) => e.textContent), 'The user wants the weather.');
  await reasoning.locator('summary').click();
  assert.equal(await reasoning.evaluate((d) => d.open), true);

  const md = reply.locator('.content');
  assert.equal(await md.locator('h2').evaluate((e) => e.innerHTML), 'Weather <em>report</em>');
  assert.equal(await md.locator('strong').innerText(), 'bold');
  assert.equal(await md.locator('p em').innerText(), 'italic');
  assert.equal(await md.locator('p > code').evaluate((e) => e.textContent), 'inline <b>code</b>');
  const links = await md.locator('a').evaluateAll(
    (as) => as.map((a) => [a.getAttribute('href'), a.textContent, a.rel]));
  assert.deepEqual(links, [['https://example.com/a_b_c', 'safe link', 'noopener noreferrer']]);
  assert.match(await md.innerText(), /\[bad one\]\(javascript:window\.__xss=1\)/);
  assert.deepEqual(await md.locator('ul > li').allInnerTexts(),
                   ['one', 'two <img src=x onerror="window.__xss=2">']);
  assert.deepEqual(await md.locator('ol > li').allInnerTexts(), ['first', 'second']);
  assert.equal(await md.locator('.code .lang').innerText(), 'python');
  assert.equal(await md.locator('.code pre code').evaluate((e) => e.textContent),
               'def f(x):\n    return x < 1 and "<script>window.__xss=3</script>"');
  assert.match(await md.innerText(), /<script>window\.__xss=4<\/script> <b>not bold<\/b>/);
  assert.equal(await page.locator('#log img, #log script, #log .content b').count(), 0);
  assert.equal(await page.evaluate(() => window.__xss), undefined);

  assert.equal(await reply.locator('.tool-call .tool-name').innerText(), 'get_weather');
  assert.equal(await reply.locator('.tool-call .tool-id').innerText(), 'call_1');
  assert.equal(await reply.locator('.tool-call .tool-args').evaluate((e) => e.textContent),
               '{\n  "city": "Paris"\n}');
  assert.equal(await reply.locator('.error').innerText(), 'generation failed: out of memory');
  const shot2 = shot.replace(/(\.png)?$/, '-rendering.png');
  await page.screenshot({ path: shot2 });
  console.log(`# screenshot of the made-up stream's rendering: ${shot2}`);
  noPageErrors();
});

test('model output never becomes markup: random Markdown and HTML render to ' +
     'the renderer\'s own elements', async () => {
  // In the page, on its own markdown(): strings of Markdown and HTML punctuation from a fixed
  // seed, each rendered and parsed; every element and attribute must be one the renderer makes.
  const bad = await page.evaluate(() => {
    let seed = 20260;
    const rand = (n) => { // mulberry32
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return (((t ^ (t >>> 14)) >>> 0) / 4294967296 * n) | 0;
    };
    const pieces = ['<', '>', '"', "'", '&', '`', '```', '~~~', '*', '**', '_', '[', ']', '(', ')',
                    '](', '#', '## ', '- ', '1. ', '> ', ' ', '\n', '\n\n', '\r', '\0', 'a', 'x y',
                    'javascript:', 'https://e.x/', 'data:', 'img', 'script', 'svg', 'onerror=',
                    'href=', '=', '/', '&lt;', '&#60;', '\u2028', '---'];
    const tags = new Set(['P', 'BR', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'STRONG', 'EM', 'CODE', 'PRE',
                          'A', 'UL', 'OL', 'LI', 'BLOCKQUOTE', 'HR', 'DIV', 'SPAN', 'BUTTON']);
    const attrs = { A: ['href', 'target', 'rel'], OL: ['start'], DIV: ['class'], SPAN: ['class'],
                    BUTTON: ['type', 'class'] };
    const out = [];
    for (let n = 0; n < 3000 && out.length < 5; n++) {
      let src = '';
      for (let k = rand(40); k > 0; k--) src += pieces[rand(pieces.length)];
      const t = document.createElement('template');
      t.innerHTML = markdown(src);
      for (const el of t.content.querySelectorAll('*')) {
        const ok = tags.has(el.tagName) &&
          [...el.attributes].every((a) => (attrs[el.tagName] || []).includes(a.name)) &&
          (el.tagName !== 'A' || /^(https?:\/\/|mailto:)/i.test(el.getAttribute('href')));
        if (!ok) out.push({ src, html: t.innerHTML });
      }
    }
    return out;
  });
  assert.deepEqual(bad, []);
  noPageErrors();
});

test('a reply shows token by token while the server generates it; Stop keeps what came', async () => {
  const p = await context.newPage(); // another origin (port): its own localStorage
  await p.goto(gatedBase + '/');
  await modelShown(p);
  await setting(p, 'temperature', 0);
  await setting(p, 'max_tokens', 200);
  // redraws of a reply's text, whatever element the page puts it in
  await p.evaluate(() => {
    window.redraws = 0;
    new MutationObserver((records) => {
      const inReply = (r) => r.target.closest && r.target.closest('.msg.assistant .content');
      if (records.some(inReply)) window.redraws++;
    }).observe(document.getElementById('log'), { childList: true, subtree: true, characterData: true });
  });
  const gate = fs.openSync(gatePath, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
  try {
    await send(p, 'Once upon a time');
    await p.waitForFunction(() => document.getElementById('send').textContent === 'Stop');
    const texts = [];
    for (let k = 0; k < 3; k++) {
      const seen = await p.evaluate(() => window.redraws);
      fs.writeSync(gate, 's'); // one engine step: one more token, and no more until the next
      await p.waitForFunction((n) => window.redraws > n, seen);
      texts.push(await lastContent(p));
      assert.equal(await p.textContent('#send'), 'Stop');
    }
    assert.ok(texts[0].length > 0, 'the first token shows');
    for (let k = 1; k < 3; k++) {
      assert.ok(texts[k].length > texts[k - 1].length && texts[k].startsWith(texts[k - 1]),
                `step ${k + 1} adds to the text: ${JSON.stringify(texts)}`);
    }

    await p.click('#send'); // now Stop
    await idle(p);
    assert.equal(await lastContent(p), texts[2]);
    assert.match(await lastReply(p).locator('.note').innerText(), /stopped/);
    // the server sees the client go and frees the slot; steps go through until it has
    const deadline = Date.now() + GUARD_MS;
    for (;;) {
      const slots = await (await fetch(gatedBase + '/slots')).json();
      if (!slots.some((s) => s.state === 'busy')) break;
      assert.ok(Date.now() < deadline, 'the stopped request still holds a slot');
      fs.writeSync(gate, 's');
      await new Promise((r) => setTimeout(r, 20)); // polling only
    }
    assert.equal(await lastContent(p), texts[2], 'nothing came after Stop');
    const msg = (await stored(p))[0].messages[1];
    assert.equal(msg.stopped, true);
    assert.ok(msg.content.length > 0);
    assert.equal(await p.locator('#log .msg.assistant .error').count(), 0);
  } finally {
    fs.closeSync(gate);
    await p.close();
  }
  noPageErrors();
});
