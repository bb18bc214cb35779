// hearth serve through the official `openai` npm client, the way agents use it:
// tool calls in the history and on offer, tool_choice, template kwargs, a
// max_tokens far past the context, the context length in models.list, and
// the paths without /v1. tests/e2e/test_agents.c starts the server on a
// Qwen3-architecture model with random weights (its text is gibberish, but
// its tokenizer and Qwen3's own chat template are real) and runs
// `node --test` with HEARTH_ORIGIN (http://127.0.0.1:PORT),
// HEARTH_MODEL_ALIAS and HEARTH_CTX_SIZE (its --ctx-size) in the environment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const origin = process.env.HEARTH_ORIGIN;
const model = process.env.HEARTH_MODEL_ALIAS ?? 'qwen3';
const nCtx = Number(process.env.HEARTH_CTX_SIZE);
if (!origin || !nCtx) {
  throw new Error('HEARTH_ORIGIN and HEARTH_CTX_SIZE are not set (run from tests/e2e/test_agents.c)');
}

const client = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Get the current weather in a city.',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
        required: ['city'],
      },
    },
  },
];

const question = [
  { role: 'system', content: 'You can call tools.' },
  { role: 'user', content: 'What is the weather in Paris?' },
];

// the history an agent sends after running the tool the model asked for; the SDKs send
// content: null on an assistant message that only calls tools
function roundTrip(content) {
  return [
    ...question,
    {
      role: 'assistant',
      content,
      tool_calls: [{
        id: 'call_1', type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
      }],
    },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temperature":21,"condition":"sunny"}' },
  ];
}

const FINISH = ['stop', 'length', 'tool_calls'];

// the prompt the server renders for a chat request (llama-server's /apply-template)
async function rendered(body) {
  const res = await fetch(`${origin}/apply-template`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const j = await res.json();
  assert.equal(typeof j.prompt, 'string');
  return j.prompt;
}

function checkCompletion(r) {
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.ok(FINISH.includes(c.finish_reason), c.finish_reason);
  assert.ok(typeof c.message.content === 'string' || c.message.content === null);
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  return c;
}

for (const content of ['', null]) {
  test(`a tool round trip in the history (content: ${JSON.stringify(content)}) is rendered and answered`, async () => {
    const messages = roundTrip(content);
    const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 16 });
    checkCompletion(r);
    // Qwen3's template shows the model its call and the result
    const prompt = await rendered({ messages, tools });
    assert.match(prompt, /<\|im_start\|>assistant\n<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Paris", "unit": "celsius"\}\}\n<\/tool_call><\|im_end\|>\n/);
    assert.match(prompt, /<\|im_start\|>user\n<tool_response>\n\{"temperature":21,"condition":"sunny"\}\n<\/tool_response><\|im_end\|>\n/);
    assert.ok(prompt.endsWith('<|im_start|>assistant\n'), JSON.stringify(prompt.slice(-80)));
  });
}

test('tools offered with stream: true: every chunk is well-formed', async () => {
  const stream = await client.chat.completions.create({
    model, messages: question, tools, max_tokens: 48, stream: true, seed: 3,
  });
  let chunks = 0;
  let finish = null;
  const calls = new Map(); // index -> {id, name, arguments}
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    assert.match(chunk.id, /^chatcmpl-/);
    assert.equal(chunk.model, model);
    assert.equal(typeof chunk.created, 'number');
    assert.equal(chunk.choices.length, 1);
    const c = chunk.choices[0];
    assert.equal(c.index, 0);
    assert.equal(typeof c.delta, 'object');
    if (c.finish_reason !== null) {
      assert.equal(finish, null, 'a second finish_reason');
      assert.ok(FINISH.includes(c.finish_reason), c.finish_reason);
      finish = c.finish_reason;
    }
    if (c.delta.content !== undefined && c.delta.content !== null) assert.equal(typeof c.delta.content, 'string');
    for (const tc of c.delta.tool_calls ?? []) {
      assert.equal(typeof tc.index, 'number');
      if (!calls.has(tc.index)) {
        // the first delta of a call names it
        assert.equal(typeof tc.id, 'string');
        assert.equal(tc.type, 'function');
        assert.equal(typeof tc.function.name, 'string');
        calls.set(tc.index, { id: tc.id, name: tc.function.name, arguments: '' });
      }
      if (tc.function?.arguments !== undefined) {
        assert.equal(typeof tc.function.arguments, 'string');
        calls.get(tc.index).arguments += tc.function.arguments;
      }
    }
  }
  assert.ok(chunks >= 2);
  assert.ok(finish !== null, 'no finish_reason');
  if (calls.size > 0) assert.equal(finish, 'tool_calls');
  for (const call of calls.values()) JSON.parse(call.arguments);
});

test('tool_choice "none" is accepted', async () => {
  const r = await client.chat.completions.create({
    model, messages: question, tools, tool_choice: 'none', max_tokens: 16,
  });
  const c = checkCompletion(r);
  assert.notEqual(c.finish_reason, 'tool_calls');
  assert.ok(!c.message.tool_calls || c.message.tool_calls.length === 0);
});

test('tool_choice "required" with a call cut short by max_tokens says length', async () => {
  // a forced call cannot finish in 4 tokens: the reply ends cut, never as a broken call
  const r = await client.chat.completions.create({
    model, messages: question, tools, tool_choice: 'required', max_tokens: 4,
    chat_template_kwargs: { enable_thinking: false },
  });
  const c = checkCompletion(r);
  assert.equal(c.finish_reason, 'length');
  assert.ok(!c.message.tool_calls || c.message.tool_calls.length === 0);
  assert.equal(r.usage.completion_tokens, 4);
});

test('tool_choice naming a function that is not offered is refused with a 400', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model, messages: question, tools, max_tokens: 4,
      tool_choice: { type: 'function', function: { name: 'send_email' } },
    }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.status, 400);
      assert.equal(err.param, 'tool_choice.function.name');
      return true;
    },
  );
});

test('chat_template_kwargs enable_thinking: false is accepted and closes the thinking block', async () => {
  const kwargs = { enable_thinking: false };
  const r = await client.chat.completions.create({
    model, messages: question, max_tokens: 8, chat_template_kwargs: kwargs,
  });
  checkCompletion(r);
  const off = await rendered({ messages: question, chat_template_kwargs: kwargs });
  assert.ok(off.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'), JSON.stringify(off.slice(-60)));
  const on = await rendered({ messages: question });
  assert.ok(!on.includes('<think>\n\n</think>'), JSON.stringify(on.slice(-60)));
  assert.ok(on.endsWith('<|im_start|>assistant\n'), JSON.stringify(on.slice(-60)));
});

test('max_tokens 32000 is clamped to the context', async () => {
  const r = await client.chat.completions.create({ model, messages: question, max_tokens: 32000 });
  const c = checkCompletion(r);
  assert.ok(['length', 'stop'].includes(c.finish_reason), c.finish_reason);
  assert.ok(r.usage.total_tokens <= nCtx, `${r.usage.total_tokens} tokens in a ${nCtx}-token context`);
});

test('models.list shows the context length', async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].id, model);
  assert.equal(page.data[0].max_model_len, nCtx);
  assert.ok(page.data[0].meta.n_ctx_train > 0);
});

test('a baseURL without /v1 works: the SDK appends /models and /chat/completions', async () => {
  const bare = new OpenAI({ baseURL: origin, apiKey: 'none', maxRetries: 0, timeout: 120_000 });
  const page = await bare.models.list();
  assert.deepEqual(page.data.map((m) => m.id), [model]);
  const r = await bare.chat.completions.create({ model, messages: question, max_tokens: 4 });
  checkCompletion(r);
});
