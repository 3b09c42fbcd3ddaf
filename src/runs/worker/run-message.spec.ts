import { renderText } from './run-message';
import { RunStatus } from '../run-status';

describe('renderText (the Slack line of a finished run)', () => {
  it('shows the outcome with its icon and the first non-blank line of the requirement, trimmed', () => {
    expect(renderText('r1', 'shop', RunStatus.SUCCESS, '\n   \n  Add a health endpoint  \r\nwith details')).toBe(
      ':white_check_mark: Run r1 in project shop: SUCCESS — Add a health endpoint',
    );
    expect(renderText('r2', 'shop', RunStatus.FAILED, 'one\ntwo')).toBe(':x: Run r2 in project shop: FAILED — one');
  });

  it('cuts the line at 200 characters and copes with a blank requirement', () => {
    expect(renderText('r3', 'p', RunStatus.SUCCESS, `${'a'.repeat(250)}\nb`)).toBe(
      `:white_check_mark: Run r3 in project p: SUCCESS — ${'a'.repeat(200)}`,
    );
    expect(renderText('r4', 'p', RunStatus.FAILED, ' \n ')).toBe(':x: Run r4 in project p: FAILED — ');
  });

  it('keeps mentions, channel pings and links from the requirement and the project name inert', () => {
    expect(
      renderText('r5', '<!here> team', RunStatus.FAILED, '<!channel> <@U123> <http://evil.example|docs> & more'),
    ).toBe(
      ':x: Run r5 in project &lt;!here&gt; team: FAILED — &lt;!channel&gt; &lt;@U123&gt; &lt;http://evil.example|docs&gt; &amp; more',
    );
  });

  it('counts the 200 characters before escaping, so no entity is cut in half', () => {
    expect(renderText('r6', 'p', RunStatus.SUCCESS, '<'.repeat(250))).toBe(
      `:white_check_mark: Run r6 in project p: SUCCESS — ${'&lt;'.repeat(200)}`,
    );
  });
});
