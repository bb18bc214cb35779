// Constrained output through the official `openai` npm client, checked with
// a real JSON-schema validator (ajv). tests/e2e/test_constrained.c starts
// the server on a Qwen3-architecture model with random weights: at
// temperature 1 it wants every token wrong, so whatever parses here, the
// grammar made parse. Environment: HEARTH_ORIGIN, HEARTH_MODEL_ALIAS,
// HEARTH_SEEDS (seeds per schema).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const origin = process.env.HEARTH_ORIGIN;
const model = process.env.HEARTH_MODEL_ALIAS ?? 'qwen3';
const nSeeds = Number(process.env.HEARTH_SEEDS ?? 6);
if (!origin) throw new Error('HEARTH_ORIGIN is not set (run from tests/e2e/test_constrained.c)');

const client = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'none', maxRetries: 0, timeout: 300_000 });
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

// Schemas that bound the reply's length, together covering what the converter supports.
const schemas = {
  person: {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 12 },
      age: { type: 'integer', minimum: 0, maximum: 150 },
      retired: { type: 'boolean' },
      nickname: { type: ['string', 'null'], maxLength: 8 },
      role: { enum: ['admin', 'user', 'guest', 7, null] },
    },
    required: ['name', 'age', 'role'],
    additionalProperties: false,
  },
  combinators: {
    type: 'object',
    properties: {
      kind: { const: 'shape' },
      shape: {
        oneOf: [
          { type: 'object', properties: { circle: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['circle'], additionalProperties: false },
          { type: 'object', properties: { square: { type: 'boolean' } }, required: ['square'], additionalProperties: false },
        ],
      },
      either: { anyOf: [{ type: 'integer', minimum: -5, maximum: 5 }, { type: 'string', maxLength: 4 }] },
      both: { allOf: [{ type: 'object', properties: { a: { type: 'boolean' } }, required: ['a'] }, { type: 'object', properties: { b: { type: 'null' } }, required: ['b'] }] },
    },
    required: ['kind', 'shape', 'either', 'both'],
    additionalProperties: false,
  },
  refs: {
    $defs: {
      point: { type: 'object', properties: { x: { type: 'integer', minimum: -99, maximum: 99 }, y: { type: 'integer', minimum: -99, maximum: 99 } }, required: ['x', 'y'], additionalProperties: false },
    },
    type: 'object',
    properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } },
    required: ['from', 'to'],
    additionalProperties: false,
  },
  arrays: {
    type: 'object',
    properties: {
      tags: { type: 'array', items: { type: 'string', maxLength: 6 }, minItems: 1, maxItems: 3 },
      pair: { type: 'array', prefixItems: [{ type: 'integer', minimum: 0, maximum: 9 }, { type: 'boolean' }], items: false },
      flags: { type: 'array', items: { type: 'boolean' }, maxItems: 4 },
    },
    required: ['tags', 'pair', 'flags'],
    additionalProperties: false,
  },
  strings: {
    type: 'object',
    properties: {
      code: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{3}$' },
      day: { type: 'string', format: 'date' },
      at: { type: 'string', format: 'time' },
      id: { type: 'string', format: 'uuid' },
      word: { type: 'string', minLength: 3, maxLength: 5 },
    },
    required: ['code', 'day', 'at', 'id', 'word'],
    additionalProperties: false,
  },
  ranges: {
    type: 'array',
    items: { type: 'integer', minimum: -1234, maximum: 56 },
    minItems: 2,
    maxItems: 5,
  },
  scalar: { enum: ['red', 'green', 'blue'] },
};

async function chat(schema, seed) {
  return client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Answer in JSON.' }],
    response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
    temperature: 1,
    seed,
    max_tokens: 1500,
    chat_template_kwargs: { enable_thinking: false },
  });
}

for (const [name, schema] of Object.entries(schemas)) {
  test(`json_schema ${name}: every seed's reply parses and validates`, async () => {
    const validate = ajv.compile(schema);
    const seeds = Array.from({ length: nSeeds }, (_, i) => 1000 + i);
    const replies = await Promise.all(seeds.map((s) => chat(schema, s)));
    for (const [i, r] of replies.entries()) {
      const c = r.choices[0];
      // the schema bounds the reply: it must end on its own, never at max_tokens
      assert.equal(c.finish_reason, 'stop', `seed ${seeds[i]}: ${c.message.content}`);
      let v;
      assert.doesNotThrow(() => { v = JSON.parse(c.message.content); }, `seed ${seeds[i]}: ${c.message.content}`);
      assert.ok(validate(v), `seed ${seeds[i]}: ${c.message.content}: ${ajv.errorsText(validate.errors)}`);
    }
  });
}

test('json_object: the reply is a JSON object', async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'JSON please.' }], response_format: { type: 'json_object' },
    temperature: 1, seed: 7, max_tokens: 3000, chat_template_kwargs: { enable_thinking: false },
  });
  const c = r.choices[0];
  // an object without bounds may run to max_tokens; what ended is an object either way
  if (c.finish_reason === 'stop') {
    const v = JSON.parse(c.message.content);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v));
  } else {
    assert.equal(c.finish_reason, 'length');
    assert.equal(c.message.content.trimStart()[0], '{');
  }
});

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Get the current weather in a city.',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 16 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
        required: ['city'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'add',
      description: 'Add two small numbers.',
      parameters: {
        type: 'object',
        properties: { a: { type: 'integer', minimum: -100, maximum: 100 }, b: { type: 'integer', minimum: -100, maximum: 100 } },
        required: ['a', 'b'],
        additionalProperties: false,
      },
    },
  },
];
const validators = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

function checkCalls(calls, only) {
  assert.ok(Array.isArray(calls) && calls.length >= 1, JSON.stringify(calls));
  for (const call of calls) {
    assert.equal(call.type, 'function');
    const name = call.function.name;
    assert.ok(name in validators, `unknown tool ${name}`);
    if (only) assert.equal(name, only);
    const args = JSON.parse(call.function.arguments);
    assert.ok(validators[name](args), `${name}(${call.function.arguments}): ${ajv.errorsText(validators[name].errors)}`);
  }
}

async function forced(tool_choice, seed, extra = {}) {
  return client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'What is the weather in Paris, and what is 2 + 2?' }],
    tools, tool_choice, temperature: 1, seed, max_tokens: 1500,
    chat_template_kwargs: { enable_thinking: false }, ...extra,
  });
}

test('tool_choice required: every seed calls a known tool with valid arguments', async () => {
  const seeds = Array.from({ length: nSeeds }, (_, i) => 2000 + i);
  const replies = await Promise.all(seeds.map((s) => forced('required', s, { parallel_tool_calls: false })));
  for (const [i, r] of replies.entries()) {
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', `seed ${seeds[i]}: ${JSON.stringify(c.message)}`);
    checkCalls(c.message.tool_calls);
    assert.equal(c.message.tool_calls.length, 1);
  }
});

test('tool_choice naming a function: every seed calls that one', async () => {
  const seeds = Array.from({ length: nSeeds }, (_, i) => 3000 + i);
  const choice = { type: 'function', function: { name: 'add' } };
  const replies = await Promise.all(seeds.map((s) => forced(choice, s)));
  for (const [i, r] of replies.entries()) {
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', `seed ${seeds[i]}: ${JSON.stringify(c.message)}`);
    checkCalls(c.message.tool_calls, 'add');
  }
});

test('tool_choice required, streamed: the deltas assemble into valid calls', async () => {
  const seeds = Array.from({ length: Math.max(2, nSeeds >> 1) }, (_, i) => 4000 + i);
  for (const seed of seeds) {
    const stream = await client.chat.completions.create({
      model, stream: true, messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools,
      tool_choice: 'required', temperature: 1, seed, max_tokens: 1500,
      chat_template_kwargs: { enable_thinking: false },
    });
    const calls = [];
    let finish = null;
    for await (const chunk of stream) {
      const ch = chunk.choices[0];
      if (!ch) continue;
      for (const d of ch.delta.tool_calls ?? []) {
        calls[d.index] ??= { type: 'function', function: { name: '', arguments: '' } };
        if (d.function?.name) calls[d.index].function.name += d.function.name;
        if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
    assert.equal(finish, 'tool_calls', `seed ${seed}`);
    checkCalls(calls);
  }
});

// llama.cpp's own fields, beside OpenAI's
async function raw(body) {
  const res = await fetch(`${origin}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Say yes or no.' }], temperature: 1, chat_template_kwargs: { enable_thinking: false }, ...body }),
  });
  return { status: res.status, body: await res.json() };
}

test('grammar (GBNF) and json_schema fields constrain the reply', async () => {
  for (let seed = 1; seed <= nSeeds; seed++) {
    const g = await raw({ seed, grammar: 'root ::= ("yes" | "no") "!"{1,3}', max_tokens: 50 });
    assert.equal(g.status, 200, JSON.stringify(g.body));
    assert.match(g.body.choices[0].message.content, /^(yes|no)!{1,3}$/);
    const j = await raw({ seed, json_schema: { type: 'integer', minimum: 10, maximum: 20 }, max_tokens: 50 });
    assert.equal(j.status, 200, JSON.stringify(j.body));
    const v = JSON.parse(j.body.choices[0].message.content);
    assert.ok(Number.isInteger(v) && v >= 10 && v <= 20, j.body.choices[0].message.content);
  }
});

test('a reply cut by max_tokens says length', async () => {
  const r = await raw({ seed: 3, grammar: 'root ::= [a-z]{40}', max_tokens: 3 });
  assert.equal(r.status, 200);
  assert.equal(r.body.choices[0].finish_reason, 'length');
  assert.equal(r.body.usage.completion_tokens, 3);
});

test('what cannot be constrained is a 400 naming why', async () => {
  const bad = await raw({ json_schema: { type: 'object', patternProperties: { x: {} } } });
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /patternProperties/);
  const g = await raw({ grammar: 'root ::= "a" |\nfoo ::= ]' });
  assert.equal(g.status, 400);
  assert.match(g.body.error.message, /line 2, column \d+/);
  const left = await raw({ grammar: 'root ::= root "a" | "b"' });
  assert.equal(left.status, 400);
  assert.match(left.body.error.message, /recursi/);
  const undef = await raw({ grammar: 'root ::= missing' });
  assert.equal(undef.status, 400);
  assert.match(undef.body.error.message, /missing/);
});
