// mcp_ping.mjs: a Model Context Protocol server on stdio (newline-delimited JSON-RPC 2.0) with
// one tool, `ping`, that takes no arguments and answers "pong". The coding-agent tests hand it to
// a client through the client's own MCP settings, so that `hearth serve --tool-choice ping`
// can force a call whose arguments are `{}`: a model with random weights writes a string
// argument for hundreds of tokens, an empty object in a few. No dependencies.
import { createInterface } from 'node:readline';

const tool = {
  name: 'ping',
  description: 'Answers pong. Takes no arguments.',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
};

function reply(id, result) {
  process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id, result }) + '\n');
}

createInterface({ input: process.stdin }).on('line', (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.id === undefined || msg.id === null)
    return; // a notification (notifications/initialized, cancelled)
  switch (msg.method) {
  case 'initialize':
    reply(msg.id, {
      protocolVersion: msg.params?.protocolVersion ?? '2025-06-18',
      capabilities: { tools: {} },
      serverInfo: { name: 'hearth-ping', version: '1.0.0' },
    });
    break;
  case 'tools/list':
    reply(msg.id, { tools: [tool] });
    break;
  case 'tools/call':
    reply(msg.id, { content: [{ type: 'text', text: 'pong' }], isError: false });
    break;
  case 'ping':
    reply(msg.id, {});
    break;
  default:
    process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: msg.id,
      error: { code: -32601, message: `method not found: ${msg.method}` } }) + '\n');
  }
});
