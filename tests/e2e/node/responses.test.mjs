// hearth serve's Responses API (POST /v1/responses) through the official `openai` npm
// client: responses.create plain and streamed, the stream helper's final response, a
// function_call_output round trip, refusals, and (once constrained decoding exists)
// text.format json_schema validated with ajv and tool_choice "required".
// tests/e2e/test_responses.c starts the server on a Qwen3-architecture model with random
// weights (gibberish text, but Qwen3's real tokenizer and template) and runs `node --test`
// with HEARTH_ORIGIN (http://127.0.0.1:PORT) and HEARTH_MODEL_ALIAS in the environment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const origin = process.env.HEARTH_ORIGIN;
const model = process.env.HEARTH_MODEL_ALIAS ?? 'qwen3';
if (!origin) throw new Error('HEARTH_ORIGIN is not set (run from tests/e2e/test_responses.c)');

const client = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });

const tools = [{
  type: 'function',
  name: 'get_weather',
  description: 'Get the current weather in a city.',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 20 } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
}];

// the text of a response's message items, as the SDK's output_text is defined
function messageText(r) {
  return r.output.filter((i) => i.type === 'message')
    .flatMap((i) => i.content).filter((c) => c.type === 'output_text').map((c) => c.text).join('');
}

// sdk: r came through the SDK's create or stream helper, which add output_text (the server,
// like the API, sends none)
function checkResponse(r, maxOut, sdk = true) {
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.model, model);
  assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
  assert.equal(r.error, null);
  if (r.status === 'incomplete') assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
  else assert.equal(r.incomplete_details, null);
  assert.ok(r.output.length >= 1);
  for (const item of r.output) {
    assert.ok(['message', 'reasoning', 'function_call'].includes(item.type), item.type);
    assert.equal(typeof item.id, 'string');
  }
  if (sdk) assert.equal(r.output_text, messageText(r));
  else assert.equal(r.output_text, undefined);
  const u = r.usage;
  assert.ok(u.input_tokens > 0);
  assert.ok(u.output_tokens >= 1 && u.output_tokens <= maxOut, `${u.output_tokens} > ${maxOut}`);
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
  assert.equal(typeof u.input_tokens_details.cached_tokens, 'number');
  assert.equal(typeof u.output_tokens_details.reasoning_tokens, 'number');
}

test('responses.create: output_text and usage', async () => {
  const r = await client.responses.create({
    model, input: 'Tell me a story.', instructions: 'Be brief.', max_output_tokens: 8,
    temperature: 0.7, top_p: 0.9, metadata: { run: 'e2e' }, store: false,
  });
  checkResponse(r, 8);
  assert.equal(r.instructions, 'Be brief.');
  assert.equal(r.max_output_tokens, 8);
  assert.equal(r.temperature, 0.7);
  assert.deepEqual(r.metadata, { run: 'e2e' });
  assert.equal(r.store, false);
  assert.deepEqual(r.text, { format: { type: 'text' } });
  // the same input rendered as a chat prompt: the usage counts its tokens
  const chat = await (await fetch(`${origin}/apply-template`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me a story.' }] }),
  })).json();
  const toks = await (await fetch(`${origin}/tokenize`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ content: chat.prompt, add_special: true }),
  })).json();
  assert.equal(r.usage.input_tokens, toks.tokens.length);
});

test('stream: true: the events in order, adding up to the final response', async () => {
  const stream = await client.responses.create({ model, input: 'Hello', max_output_tokens: 10, stream: true });
  const events = [];
  for await (const ev of stream) events.push(ev);
  assert.equal(events[0].type, 'response.created');
  assert.equal(events[1].type, 'response.in_progress');
  const last = events.at(-1);
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), last.type);
  events.forEach((ev, i) => assert.equal(ev.sequence_number, i));
  let text = '';
  let open = null;
  for (const ev of events.slice(2, -1)) {
    if (ev.type === 'response.output_item.added') {
      assert.equal(open, null);
      open = ev.output_index;
    } else if (ev.type === 'response.output_item.done') {
      assert.equal(ev.output_index, open);
      open = null;
    } else {
      assert.equal(ev.output_index, open, ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
    }
  }
  assert.equal(open, null);
  checkResponse(last.response, 10, false);
  assert.equal(text, messageText(last.response));
});

test('responses.stream helper: text deltas and finalResponse', async () => {
  const stream = client.responses.stream({ model, input: 'Hello', max_output_tokens: 6 });
  let text = '';
  stream.on('response.output_text.delta', (ev) => { text += ev.delta; });
  const final = await stream.finalResponse();
  checkResponse(final, 6);
  assert.equal(final.output_text, text);
});

test('a function_call_output round trip is answered', async () => {
  const input = [
    { role: 'user', content: 'What is the weather in Paris?' },
    { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
    { type: 'function_call_output', call_id: 'call_1', output: '{"temperature":21}' },
  ];
  const r = await client.responses.create({ model, input, tools, max_output_tokens: 8 });
  checkResponse(r, 8);
  assert.equal(r.tools[0].name, 'get_weather');
  for (const item of r.output.filter((i) => i.type === 'function_call')) {
    assert.match(item.call_id, /^call_/);
    JSON.parse(item.arguments);
  }
});

test('refusals are 400s naming the field', async () => {
  const cases = [
    [{ input: 'x', previous_response_id: 'resp_123' }, 'previous_response_id'],
    [{ input: 'x', background: true }, 'background'],
    [{ input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
  ];
  for (const [body, param] of cases) {
    await assert.rejects(client.responses.create({ model, ...body }), (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.status, 400);
      assert.equal(err.param, param);
      return true;
    });
  }
});

test('text.format json_schema: the output parses and validates', async () => {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0, maximum: 130 } },
    required: ['name', 'age'],
    additionalProperties: false,
  };
  const r = await client.responses.create({
    model, input: 'Invent a person.', max_output_tokens: 400, temperature: 1,
    text: { format: { type: 'json_schema', name: 'person', schema, strict: true } },
  });
  assert.equal(r.status, 'completed');
  const { default: Ajv } = await import('ajv');
  const validate = new Ajv().compile(schema);
  const value = JSON.parse(r.output_text);
  assert.ok(validate(value), JSON.stringify(validate.errors));
});

test('tool_choice "required": the output is a call of an offered tool', async () => {
  const r = await client.responses.create({
    model, input: 'What is the weather in Paris?', tools, tool_choice: 'required', max_output_tokens: 400,
    temperature: 1,
  });
  const calls = r.output.filter((i) => i.type === 'function_call');
  assert.ok(calls.length >= 1, JSON.stringify(r.output));
  const { default: Ajv } = await import('ajv');
  const validate = new Ajv().compile(tools[0].parameters);
  for (const call of calls) {
    assert.equal(call.name, 'get_weather');
    assert.ok(validate(JSON.parse(call.arguments)), JSON.stringify(validate.errors));
  }
});
