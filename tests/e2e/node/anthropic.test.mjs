// hearth serve through the official `@anthropic-ai/sdk` npm client: messages.create,
// the messages.stream helper (text events, the final message it assembles),
// messages.countTokens, a tool round trip in the history, errors as the SDK's
// typed exceptions, and a forced tool_use whose input must validate against the
// tool's input_schema (ajv), and beta.messages with what Claude Code sends.
// tests/e2e/test_anthropic.c starts the server on a
// Qwen3-architecture model with random weights (gibberish text, but Qwen3's real
// tokenizer and template) and runs `node --test` with HEARTH_ORIGIN,
// HEARTH_MODEL_ALIAS and HEARTH_API_KEY in the environment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';

const origin = process.env.HEARTH_ORIGIN;
const model = process.env.HEARTH_MODEL_ALIAS ?? 'qwen3';
const apiKey = process.env.HEARTH_API_KEY;
if (!origin || !apiKey) {
  throw new Error('HEARTH_ORIGIN and HEARTH_API_KEY are not set (run from tests/e2e/test_anthropic.c)');
}

const client = new Anthropic({ baseURL: origin, apiKey, maxRetries: 0, timeout: 120_000 });

const tool = {
  name: 'get_weather',
  description: 'Get the current weather in a city.',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 20 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
    required: ['city'],
    additionalProperties: false,
  },
};

const REASONS = ['end_turn', 'max_tokens', 'stop_sequence', 'tool_use', 'model_context_window_exceeded'];

function checkMessage(msg, maxTokens) {
  assert.match(msg.id, /^msg_/);
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.model, model);
  assert.ok(Array.isArray(msg.content));
  for (const b of msg.content) {
    assert.ok(['text', 'thinking', 'tool_use'].includes(b.type), b.type);
    if (b.type === 'thinking') assert.equal(typeof b.signature, 'string');
  }
  assert.ok(REASONS.includes(msg.stop_reason), msg.stop_reason);
  assert.ok(msg.usage.output_tokens >= 1 && msg.usage.output_tokens <= maxTokens);
  assert.ok(msg.usage.input_tokens >= 1);
}

const greedy = {
  model,
  max_tokens: 20,
  temperature: 0,
  system: 'You are terse.',
  messages: [{ role: 'user', content: 'Say something.' }],
};

test('messages.create returns a message', async () => {
  const msg = await client.messages.create(greedy);
  checkMessage(msg, 20);
});

test('messages.stream: text events, and the final message equals create at temperature 0', async () => {
  const whole = await client.messages.create(greedy);
  const stream = client.messages.stream(greedy);
  let streamed = '';
  stream.on('text', (delta) => { streamed += delta; });
  const final = await stream.finalMessage();
  checkMessage(final, 20);
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  const text = final.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  assert.equal(streamed, text);
});

test('messages.countTokens counts the prompt a call reads', async () => {
  const { input_tokens } = await client.messages.countTokens({
    model, system: greedy.system, messages: greedy.messages, tools: [tool],
  });
  const msg = await client.messages.create({ ...greedy, tools: [tool], max_tokens: 2 });
  assert.equal(msg.usage.input_tokens + msg.usage.cache_read_input_tokens, input_tokens);
  const without = await client.messages.countTokens({ model, system: greedy.system, messages: greedy.messages });
  assert.ok(without.input_tokens < input_tokens, 'the tool definitions are in the prompt');
});

test('a tool round trip in the history is accepted', async () => {
  const msg = await client.messages.create({
    model,
    max_tokens: 8,
    tools: [tool],
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'I need the tool.', signature: '' },
          { type: 'text', text: 'Let me check.' },
          { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_01', content: [{ type: 'text', text: '21C, sunny' }] },
          { type: 'text', text: 'Thanks.' },
        ],
      },
    ],
  });
  checkMessage(msg, 8);
});

test('errors come back as the SDK\'s typed exceptions', async () => {
  await assert.rejects(
    client.messages.create({ ...greedy, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }] }),
    (e) => e instanceof Anthropic.BadRequestError && e.status === 400 &&
      e.error?.type === 'error' && e.error?.error?.type === 'invalid_request_error',
  );
  const wrong = new Anthropic({ baseURL: origin, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrong.messages.create(greedy),
    (e) => e instanceof Anthropic.AuthenticationError && e.error?.error?.type === 'authentication_error');
});

// On a random-weight model only the grammar can make these calls: thinking is off so the
// reply is the call itself, and the schema bounds it so it ends before max_tokens.
test('a forced tool_use validates against its input_schema', async () => {
  const validate = new Ajv().compile(tool.input_schema);
  for (const tool_choice of [{ type: 'tool', name: 'get_weather' }, { type: 'any' }]) {
    for (const seed of [1, 2, 3]) {
      const msg = await client.messages.create({
        model, max_tokens: 300, temperature: 1, tools: [tool], tool_choice,
        thinking: { type: 'disabled' }, metadata: { user_id: `seed-${seed}` },
        messages: [{ role: 'user', content: `What is the weather in Paris? (${seed})` }],
      });
      checkMessage(msg, 300);
      assert.equal(msg.stop_reason, 'tool_use', JSON.stringify(msg.content));
      const uses = msg.content.filter((b) => b.type === 'tool_use');
      assert.ok(uses.length >= 1);
      for (const u of uses) {
        assert.match(u.id, /^toolu_/);
        assert.equal(u.name, 'get_weather');
        assert.ok(validate(u.input), `${JSON.stringify(u.input)}: ${JSON.stringify(validate.errors)}`);
      }
    }
  }
});

test('a forced tool_use streamed: input_json_delta assembles into valid input', async () => {
  const validate = new Ajv().compile(tool.input_schema);
  const stream = client.messages.stream({
    model, max_tokens: 300, temperature: 1, tools: [tool],
    tool_choice: { type: 'any', disable_parallel_tool_use: true },
    thinking: { type: 'disabled' }, messages: [{ role: 'user', content: 'Weather in Oslo?' }],
  });
  let partial = '';
  stream.on('inputJson', (delta) => { partial += delta; });
  const msg = await stream.finalMessage();
  assert.equal(msg.stop_reason, 'tool_use');
  const use = msg.content.find((b) => b.type === 'tool_use');
  assert.ok(use, JSON.stringify(msg.content));
  assert.deepEqual(JSON.parse(partial), use.input);
  assert.ok(validate(use.input), JSON.stringify(validate.errors));
});

// Claude Code talks to the beta client: betas become the anthropic-beta header (and
// ?beta=true), and its requests carry fields that change nothing here (accepted) beside
// ones hearth honours (effort, adaptive thinking, context_management, a system message
// between turns, a strict tool).
test('beta.messages as Claude Code calls it', async () => {
  const body = {
    model, max_tokens: 16, temperature: 0, stream: false,
    betas: ['claude-code-20250219', 'interleaved-thinking-2025-05-14', 'context-management-2025-06-27'],
    metadata: { user_id: 'user_1_account_2_session_3' },
    system: [
      { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.3; cc_entrypoint=cli; cch=1a2b3;' },
      { type: 'text', text: 'You are a coding agent.', cache_control: { type: 'ephemeral' } },
    ],
    thinking: { type: 'adaptive' },
    output_config: { effort: 'high' },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    tools: [{ ...tool, strict: true, cache_control: { type: 'ephemeral' } }],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'Hello.', cache_control: { type: 'ephemeral' } }] },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'Greet back.', signature: '' }, { type: 'text', text: 'Hi!' }] },
      { role: 'system', content: 'The user prefers short answers.' },
      { role: 'user', content: 'What is the weather in Paris?' },
    ],
  };
  const msg = await client.beta.messages.create(body);
  checkMessage(msg, 16);
  const counted = await client.beta.messages.countTokens({
    model, betas: body.betas, system: body.system, thinking: body.thinking,
    output_config: body.output_config, context_management: body.context_management,
    tools: body.tools, messages: body.messages,
  });
  assert.equal(counted.input_tokens, msg.usage.input_tokens + msg.usage.cache_read_input_tokens);
});
