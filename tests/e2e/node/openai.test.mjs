// hearth serve through the official `openai` npm client: chat and completions,
// streaming and not. tests/e2e/test_serve.c starts the server and runs
// `node --test` with HEARTH_BASE_URL (http://127.0.0.1:PORT/v1),
// HEARTH_API_KEY_FOR_TEST and HEARTH_MODEL_ALIAS in the environment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.HEARTH_BASE_URL;
const model = process.env.HEARTH_MODEL_ALIAS ?? 'stories';
if (!baseURL) throw new Error('HEARTH_BASE_URL is not set (run from tests/e2e/test_serve.c)');

const client = new OpenAI({
  baseURL,
  apiKey: process.env.HEARTH_API_KEY_FOR_TEST ?? 'none',
  maxRetries: 0,
  timeout: 120_000,
});

const messages = [
  { role: 'system', content: 'You tell short stories.' },
  { role: 'user', content: 'Once upon a time' },
];

test('models.list names the served model', async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  assert.deepEqual(ids, [model]);
});

test('chat.completions.create, not streaming', async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 16, temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.ok(r.usage.prompt_tokens_details.cached_tokens >= 0);
});

test('chat.completions.create, streaming, gives the same text', async () => {
  const plain = await client.chat.completions.create({
    model, messages, max_tokens: 20, temperature: 0,
  });
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 20, temperature: 0,
    stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let role = null;
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(finish, plain.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, plain.usage.completion_tokens);
});

test('completions.create, not streaming, matches llama.cpp', async () => {
  const r = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 16, temperature: 0,
  });
  assert.equal(r.object, 'text_completion');
  // reference/greedy.tsv's first row, cut at 16 tokens
  assert.ok(r.choices[0].text.startsWith(', there was a little girl named Lily.'), r.choices[0].text);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 16);
});

test('completions.create, streaming, gives the same text', async () => {
  const plain = await client.completions.create({
    model, prompt: 'The little dog', max_tokens: 24, temperature: 0,
  });
  const stream = await client.completions.create({
    model, prompt: 'The little dog', max_tokens: 24, temperature: 0, stream: true,
  });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, plain.choices[0].text);
  assert.equal(finish, 'length');
});

test('errors surface as APIError with OpenAI fields', async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages: [], max_tokens: 4 }),
    (err) => {
      assert.ok(err instanceof OpenAI.APIError);
      assert.equal(err.status, 400);
      assert.equal(err.param, 'messages');
      assert.equal(err.type, 'invalid_request_error');
      return true;
    },
  );
  const bad = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (err) => err.status === 401);
});
