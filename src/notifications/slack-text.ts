/**
 * Slack reads `<...>` in a message's text as a control sequence: `<!channel>` and `<!here>` ping
 * everyone, `<@U123>` mentions a user, `<https://x|click>` shows a link under another label. Text
 * that comes from users (a work item's title, a requirement, a project name) must be inert, so
 * the three characters Slack gives meaning to are escaped exactly as its formatting guide asks.
 * `&` goes first, or the entities of the other two would be escaped again.
 */
export function escapeSlackText(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
