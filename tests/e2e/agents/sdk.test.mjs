// The AI SDK (Vercel `ai` 6 with @ai-sdk/openai-compatible, @ai-sdk/openai's chat and
// Responses models) and LangChain JS (@langchain/openai's ChatOpenAI with bindTools, on Chat
// Completions and on Responses) each running one agent turn against hearth serve: the model
// calls `ping` (no arguments), the library (or this script, for LangChain) runs it, sends
// "pong" back, and the model's next answer ends the turn.
//
// tests/e2e/test_coding_agents.c starts the server on a Qwen3-architecture model with random
// weights and Qwen3's own template, with `--tool-choice ping` (the first request of a turn must
// call it; the one carrying its result is left free), `--logit-bias` putting EOS first (a free
// answer ends at once) and `-n` (a cap on every answer), and runs `node --test` with
// HEARTH_ORIGIN (http://127.0.0.1:PORT) and HEARTH_MODEL_ALIAS set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, streamText, stepCountIs, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';
import { tool as lcTool } from '@langchain/core/tools';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { z } from 'zod';

const origin = process.env.HEARTH_ORIGIN;
const model = process.env.HEARTH_MODEL_ALIAS ?? 'qwen3';
if (!origin) throw new Error('HEARTH_ORIGIN is not set (run from tests/e2e/test_coding_agents.c)');

const PROMPT = 'Say hello.';

// ---------------------------------------------------------------- AI SDK ---

const ping = tool({
  description: 'Answers pong. Takes no arguments.',
  inputSchema: z.object({}),
  execute: async () => 'pong',
});

// One turn through the AI SDK's tool loop: step 1 calls ping, step 2 carries "pong" and ends.
function checkTurn(r, label) {
  assert.ok(r.steps.length >= 2, `${label}: ${r.steps.length} step(s), want the call and an answer`);
  const first = r.steps[0];
  assert.equal(first.finishReason, 'tool-calls', `${label}: first step ended ${first.finishReason}`);
  assert.equal(first.toolCalls.length, 1);
  assert.equal(first.toolCalls[0].toolName, 'ping');
  assert.deepEqual(first.toolCalls[0].input, {});
  assert.equal(first.toolResults[0].output, 'pong');
  const last = r.steps[r.steps.length - 1];
  // the server puts EOS first (--logit-bias): the free answer ends by itself
  assert.equal(last.finishReason, 'stop', `${label}: ended ${last.finishReason}`);
  assert.equal(typeof r.text, 'string');
}

const compatible = createOpenAICompatible({
  name: 'hearth', baseURL: `${origin}/v1`, apiKey: 'hearth-test', includeUsage: true,
});
const openai = createOpenAI({ baseURL: `${origin}/v1`, apiKey: 'hearth-test' });

test('AI SDK, @ai-sdk/openai-compatible: generateText with a tool round trip', async () => {
  const r = await generateText({
    model: compatible.chatModel(model), tools: { ping }, prompt: PROMPT, stopWhen: stepCountIs(4),
    maxRetries: 0,
  });
  checkTurn(r, 'openai-compatible');
  assert.ok(r.totalUsage.inputTokens > 0);
});

test('AI SDK, @ai-sdk/openai chat: streamText with a tool round trip', async () => {
  const s = streamText({
    model: openai.chat(model), tools: { ping }, prompt: PROMPT, stopWhen: stepCountIs(4),
    maxRetries: 0, onError: ({ error }) => { throw error; },
  });
  for await (const _ of s.textStream); // drain
  const steps = await s.steps;
  checkTurn({ steps, text: await s.text }, 'openai chat');
});

test('AI SDK, @ai-sdk/openai responses: generateText with a tool round trip', async () => {
  const r = await generateText({
    model: openai.responses(model), tools: { ping }, prompt: PROMPT, stopWhen: stepCountIs(4),
    maxRetries: 0,
  });
  checkTurn(r, 'openai responses');
});

test('AI SDK, @ai-sdk/openai responses: streamText with a tool round trip', async () => {
  const s = streamText({
    model: openai.responses(model), tools: { ping }, prompt: PROMPT, stopWhen: stepCountIs(4),
    maxRetries: 0, onError: ({ error }) => { throw error; },
  });
  for await (const _ of s.textStream);
  checkTurn({ steps: await s.steps, text: await s.text }, 'openai responses stream');
});

// ------------------------------------------------------------- LangChain ---

const lcPing = lcTool(async () => 'pong', {
  name: 'ping', description: 'Answers pong. Takes no arguments.', schema: z.object({}),
});

// The loop an agent writes with LangChain: invoke, run the tool calls, invoke again.
// With stream, the chunks of .stream() are concatenated (invoke on a streaming model would
// count tokens with tiktoken, which fetches its tables from the network).
async function langchainTurn(llm, label, stream = false) {
  const bound = llm.bindTools([lcPing]);
  const ask = async (messages) => {
    if (!stream)
      return bound.invoke(messages);
    let whole;
    for await (const chunk of await bound.stream(messages))
      whole = whole === undefined ? chunk : whole.concat(chunk);
    return whole;
  };
  const messages = [new HumanMessage(PROMPT)];
  const first = await ask(messages);
  assert.equal(first.tool_calls?.length, 1, `${label}: ${JSON.stringify(first.content)}`);
  const call = first.tool_calls[0];
  assert.equal(call.name, 'ping');
  assert.deepEqual(call.args, {});
  messages.push(first);
  messages.push(new ToolMessage({ content: await lcPing.invoke(call.args), tool_call_id: call.id }));
  const second = await ask(messages);
  assert.ok(typeof second.content === 'string' || Array.isArray(second.content));
  return second;
}

test('LangChain ChatOpenAI (chat completions): bindTools and a tool round trip', async () => {
  const llm = new ChatOpenAI({
    model, apiKey: 'hearth-test', maxRetries: 0, configuration: { baseURL: `${origin}/v1` },
  });
  await langchainTurn(llm, 'langchain chat');
});

test('LangChain ChatOpenAI (Responses): bindTools and a tool round trip', async () => {
  const llm = new ChatOpenAI({
    model, apiKey: 'hearth-test', maxRetries: 0, useResponsesApi: true,
    configuration: { baseURL: `${origin}/v1` },
  });
  await langchainTurn(llm, 'langchain responses');
});

test('LangChain ChatOpenAI (chat completions, streamed): bindTools and a tool round trip', async () => {
  const llm = new ChatOpenAI({
    model, apiKey: 'hearth-test', maxRetries: 0, configuration: { baseURL: `${origin}/v1` },
  });
  await langchainTurn(llm, 'langchain chat stream', true);
});

test('LangChain ChatOpenAI (Responses, streamed): bindTools and a tool round trip', async () => {
  const llm = new ChatOpenAI({
    model, apiKey: 'hearth-test', maxRetries: 0, useResponsesApi: true,
    configuration: { baseURL: `${origin}/v1` },
  });
  await langchainTurn(llm, 'langchain responses stream', true);
});

