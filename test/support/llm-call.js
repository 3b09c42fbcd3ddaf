// A command's LLM call, as an OpenAI or Anthropic SDK would make it: POST to $OPENAI_BASE_URL or
// $ANTHROPIC_BASE_URL with the provider's key in its own header. Prints the answer's body to
// stdout; exits 0 on a 2xx, 1 otherwise. Usage: node llm-call.js openai|anthropic PROMPT [stream]
const [provider, prompt, stream] = process.argv.slice(2);
const anthropic = provider === 'anthropic';
const url = anthropic ? `${process.env.ANTHROPIC_BASE_URL}/v1/messages` : `${process.env.OPENAI_BASE_URL}/chat/completions`;
const headers = anthropic
  ? { 'content-type': 'application/json', 'x-api-key': 'sk-ant-test-key', 'anthropic-version': '2023-06-01' }
  : { 'content-type': 'application/json', authorization: 'Bearer sk-test-openai-key' };
const body = { model: anthropic ? 'claude-test' : 'gpt-test', max_tokens: 64, messages: [{ role: 'user', content: prompt }] };
if (stream === 'stream') body.stream = true;
fetch(url, { method: 'POST', headers, body: JSON.stringify(body) }).then(
  async (res) => {
    process.stdout.write(Buffer.from(await res.arrayBuffer()));
    process.stderr.write(`llm-call: ${res.status} ${res.headers.get('x-onceflow-cache') ?? ''}\n`);
    process.exitCode = res.ok ? 0 : 1;
  },
  (err) => {
    process.stderr.write(`llm-call: ${err.message}\n`);
    process.exitCode = 1;
  },
);
